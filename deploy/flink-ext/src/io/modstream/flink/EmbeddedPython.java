package io.modstream.flink;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.Serializable;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

import org.apache.flink.api.common.JobID;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.fs.CloseableRegistry;
import org.apache.flink.python.PythonOptions;
import org.apache.flink.python.env.AbstractPythonEnvironmentManager;
import org.apache.flink.python.env.PythonDependencyInfo;
import org.apache.flink.python.env.embedded.EmbeddedPythonEnvironment;
import org.apache.flink.python.env.embedded.EmbeddedPythonEnvironmentManager;
import org.apache.flink.python.util.PythonConfigUtil;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.operators.StreamingRuntimeContext;
import org.apache.flink.streaming.api.operators.python.embedded.AbstractEmbeddedPythonFunctionOperator;

import pemja.core.PythonInterpreter;

/**
 * The embedded Python of an operator of ours (BatchedVersions.java), opened the way PyFlink's own
 * thread-mode operators open theirs ({@code AbstractEmbeddedPythonFunctionOperator.open()} in
 * flink-python 2.2.1), so it sees what they see: the job's {@code python.executable}, its
 * {@code python.files} on the PYTHONPATH and its {@code python.archives} extracted on the
 * TaskManager (a Python from an archive becomes the interpreter's home). A local MiniCluster,
 * a session cluster given a package ({@code flink run -pyfs -pyarch -pyexec}) and a Kubernetes
 * deployment then differ only in that configuration, never in this operator (issue 26).
 *
 * <p>The configuration is PyFlink's own ({@link PythonConfigUtil#extractPythonConfiguration}),
 * taken from the job's environment when the operator is added: the job's main sets every
 * Python option before it builds the graph (modstream/jobs/runtime.py create_env, or the {@code flink
 * run} options). The archives and files are those PyFlink ships for its own operators (it
 * registers them in the distributed cache when the job is executed), found under the same keys,
 * and extracted once per job and TaskManager into the directory PyFlink's operators share.
 *
 * <p>With {@code modstream.python.worker-process: true} in the job's configuration, the handler
 * runs in a Python process of its own ({@link Worker}, modstream/jobs/worker.py) instead of the
 * TaskManager's one embedded interpreter: the same Python, modules and working directory (the
 * job's Python environment as PyFlink prepares it), the same calls, their payloads over a
 * pipe. Each operator then has an interpreter lock of its own, where embedded they all take
 * turns at one (docs/BENCHMARKS.md, "A Python process per operator").
 */
public final class EmbeddedPython implements Serializable {
    private static final long serialVersionUID = 1L;
    /** The job's option: each of our operators' Python in a process of its own. */
    public static final ConfigOption<Boolean> WORKER_PROCESS =
            ConfigOptions.key("modstream.python.worker-process").booleanType().defaultValue(false)
                    .withDescription("Run each batched operator's Python in a process of its own");
    /** The names {@link #WORKER_PROCESS_FOR} knows: the handler classes without "Batched",
     * lower case ({@link #role}). */
    static final List<String> ROLES = List.of("decode", "moderate", "retro", "sanctions");
    /** The job's option: these operators' Python in a process of its own, the others
     * embedded. */
    public static final ConfigOption<List<String>> WORKER_PROCESS_FOR =
            ConfigOptions.key("modstream.python.worker-process-for").stringType().asList()
                    .defaultValues()
                    .withDescription("Run these batched operators' Python ("
                            + String.join(", ", ROLES) + ") in a process of its own each");
    /** Run in the interpreter once a handler is made: its garbage collector frozen and set
     * (modstream/jobs/collector.py), as the worker process does. */
    static final String SETTLE =
            "import modstream.jobs.collector as _modstream_collector\n_modstream_collector.settle()";
    private final Configuration pythonConfig;
    private final boolean workerProcess;

    private transient EmbeddedPythonEnvironmentManager environmentManager;
    private transient EmbeddedPythonEnvironment environment;
    private transient PythonInterpreter interpreter;
    private transient JobID job;
    private transient boolean inWorkingDirectory;
    private transient String workingDirectory;
    private transient Worker worker;

    private EmbeddedPython(Configuration pythonConfig, boolean workerProcess) {
        this.pythonConfig = pythonConfig;
        this.workerProcess = workerProcess;
    }

    /** The Python configuration of the job being built in {@code env}, as PyFlink hands it to
     * its own operators, for the operator whose handler class is {@code handlerClass}: in a
     * worker process with {@link #WORKER_PROCESS}, or when {@link #WORKER_PROCESS_FOR} names it. */
    public static EmbeddedPython of(StreamExecutionEnvironment env, String handlerClass) {
        Configuration config = PythonConfigUtil.extractPythonConfiguration(env.getConfiguration());
        // Ours are embedded whatever PyFlink's own operators use: with the job in process mode
        // (--flink-conf python.execution-mode=process) the environment manager refused to
        // open ("Unsupported execution mode process") and the job restarted forever.
        config.set(PythonOptions.PYTHON_EXECUTION_MODE, "thread");
        List<String> named = env.getConfiguration().get(WORKER_PROCESS_FOR);
        for (String name : named) {
            if (!ROLES.contains(name)) {
                throw new IllegalArgumentException(WORKER_PROCESS_FOR.key() + ": no operator "
                        + "named '" + name + "' (known: " + String.join(", ", ROLES)
                        + "; separate names with ';')");
            }
        }
        boolean worker = env.getConfiguration().get(WORKER_PROCESS)
                || named.contains(role(handlerClass));
        return new EmbeddedPython(config, worker);
    }

    /** Whether the handler runs in a worker process, not the embedded interpreter. */
    public boolean inWorkerProcess() {
        return workerProcess;
    }

    /** The name {@link #WORKER_PROCESS_FOR} gives a handler class: BatchedRetro is "retro". */
    static String role(String handlerClass) {
        String bare = handlerClass.startsWith("Batched")
                ? handlerClass.substring("Batched".length()) : handlerClass;
        return bare.toLowerCase(java.util.Locale.ROOT);
    }

    /** The interpreter, in the job's Python environment (prepared on this TaskManager at the
     * first open of the job), its working directory the job's. */
    public PythonInterpreter open(StreamingRuntimeContext context, String[] tmpDirectories)
            throws Exception {
        job = context.getJobInfo().getJobId();
        PythonDependencyInfo dependencies =
                PythonDependencyInfo.create(pythonConfig, context.getDistributedCache());
        environmentManager = new EmbeddedPythonEnvironmentManager(
                dependencies, tmpDirectories, new HashMap<>(System.getenv()), job);
        environmentManager.open();
        environment = (EmbeddedPythonEnvironment) environmentManager.createEnvironment();
        workingDirectory =
                environment.getEnv().get(AbstractPythonEnvironmentManager.PYTHON_WORKING_DIR);
        if (workerProcess) {
            return null;  // the worker, not this JVM, runs in the working directory
        }
        interpreter = new PythonInterpreter(environment.getConfig());
        if (workingDirectory != null) {
            enterWorkingDirectory(workingDirectory);
        }
        return interpreter;
    }

    /** In the interpreter {@link #open} made: {@code module.cls(pickledConfig, subtask)}, kept
     * under a name of its own ({@code prefix}, the subtask, {@code owner}'s identity); the name
     * its methods are called by ({@link #call}). A worker process is ended by {@code
     * cancelables} too (the task's): a call blocked on a hung worker cannot be interrupted, and a
     * cancelled task must not wait for it. */
    public String instantiate(String prefix, Object owner, String module, String cls,
            byte[] pickledConfig, int subtask, CloseableRegistry cancelables) throws IOException {
        if (workerProcess) {
            worker = Worker.start(environment, workingDirectory, module, cls, pickledConfig,
                    subtask);
            cancelables.registerCloseable(worker::destroy);
            return module + "." + cls;
        }
        String name = prefix + subtask + "_" + System.identityHashCode(owner);
        interpreter.set(name + "_config", pickledConfig);
        interpreter.exec("import " + module + " as " + name + "_module\n"
                + name + " = " + name + "_module." + cls + "(" + name + "_config, " + subtask + ")\n"
                + SETTLE);
        return name;
    }

    /** {@code handler.method(payload)} ({@link #instantiate}'s name): the bytes it answers. */
    public byte[] call(String handler, String method, byte[] payload) {
        if (worker != null) {
            return worker.call(method, payload);
        }
        return (byte[]) interpreter.invokeMethod(handler, method, payload);
    }

    /** Into the job's working directory, counted in PyFlink's own per-job tally, so that the
     * first interpreter of the job here (PyFlink's or ours) records where the process was and
     * the last one to close goes back there: the directory is process-wide and deleted with the
     * job's environment, and a second tally would leave the process in a deleted directory
     * (the next job's {@code os.getcwd()} then fails: FileNotFoundError). */
    private void enterWorkingDirectory(String workingDirectory) throws Exception {
        ReentrantLock lock = PyFlinkWorkingDirectories.LOCK;
        lock.lockInterruptibly();
        try {
            Tuple2<String, Integer> entered = PyFlinkWorkingDirectories.TALLY.get(job);
            if (entered == null) {
                entered = Tuple2.of(null, 0);
                PyFlinkWorkingDirectories.TALLY.put(job, entered);
            }
            entered.f1 += 1;
            inWorkingDirectory = true;
            if (entered.f0 == null) {
                interpreter.exec("import os\n_modstream_cwd = os.getcwd()");
                entered.f0 = interpreter.get("_modstream_cwd", String.class);
                interpreter.exec("import os\nos.chdir(" + pythonString(workingDirectory) + ")");
            }
        } finally {
            lock.unlock();
        }
    }

    /** The interpreter closed, the working directory restored by the job's last one here, and
     * the job's Python environment released (deleted with its last user, PyFlink's included). */
    public void close() throws Exception {
        try {
            if (worker != null) {
                try {
                    worker.close();
                } finally {
                    worker = null;
                }
            }
        } finally {
            closeInterpreter();
        }
    }

    private void closeInterpreter() throws Exception {
        try {
            if (inWorkingDirectory) {
                leaveWorkingDirectory();
            }
        } finally {
            try {
                if (interpreter != null) {
                    interpreter.close();
                }
            } finally {
                if (environmentManager != null) {
                    environmentManager.close();
                }
            }
        }
    }

    private void leaveWorkingDirectory() throws Exception {
        ReentrantLock lock = PyFlinkWorkingDirectories.LOCK;
        lock.lockInterruptibly();
        try {
            Tuple2<String, Integer> entered = PyFlinkWorkingDirectories.TALLY.get(job);
            if (entered == null) {
                return;
            }
            entered.f1 -= 1;
            if (entered.f1 == 0) {
                interpreter.exec("import os\nos.chdir(" + pythonString(entered.f0) + ")");
            }
        } finally {
            lock.unlock();
        }
    }

    /**
     * A handler in a Python process of its own (modstream/jobs/worker.py): started with the
     * job's Python executable, paths and environment, in the job's working directory; frames
     * of a 4-byte length and bytes over its standard input and output. In:
     * the handler to make ({@code module}, {@code cls}, the pickled config, the subtask), then
     * per call the method's name and the payload. Out: per call a status byte (0: the answer
     * follows, 1: Python's traceback follows) and the bytes. Its standard error is the
     * TaskManager's. A process that ended fails the call, and so the task (Flink restarts it
     * from the last checkpoint with a new process).
     */
    static final class Worker {
        private final Process process;
        private final DataOutputStream in;
        private final DataInputStream out;

        private Worker(Process process) {
            this.process = process;
            this.in = new DataOutputStream(
                    new BufferedOutputStream(process.getOutputStream(), 1 << 16));
            this.out = new DataInputStream(
                    new BufferedInputStream(process.getInputStream(), 1 << 16));
        }

        static Worker start(EmbeddedPythonEnvironment environment, String workingDirectory,
                String module, String cls, byte[] pickledConfig, int subtask) throws IOException {
            List<String> command = new ArrayList<>();
            command.add(environment.getConfig().getPythonExec());
            command.add("-m");
            command.add("modstream.jobs.worker");
            command.add(module + "." + cls + "#" + subtask);  // read by ps, not by the worker
            ProcessBuilder builder = new ProcessBuilder(command)
                    .redirectError(ProcessBuilder.Redirect.INHERIT);
            // The job's Python environment as PyFlink makes it for its own workers: its
            // variables, its python.files (the interpreter config's paths), a Python from an
            // archive as the home.
            Map<String, String> variables = builder.environment();
            variables.putAll(environment.getEnv());
            String[] paths = environment.getConfig().getPaths();
            if (paths != null && paths.length > 0) {
                variables.put("PYTHONPATH", String.join(File.pathSeparator, paths));
            }
            String home = environment.getConfig().getPythonHome();
            if (home != null && !home.isEmpty()) {
                variables.put("PYTHONHOME", home);
            }
            if (workingDirectory != null) {
                builder.directory(new File(workingDirectory));
            }
            Worker worker = new Worker(builder.start());
            try {
                worker.frame(module.getBytes(StandardCharsets.UTF_8));
                worker.frame(cls.getBytes(StandardCharsets.UTF_8));
                worker.frame(pickledConfig);
                worker.frame(Integer.toString(subtask).getBytes(StandardCharsets.UTF_8));
                worker.answer("start " + module + "." + cls);
            } catch (IOException | RuntimeException e) {
                String exited = worker.exited();
                worker.destroy();
                throw new IOException("the Python worker process " + command + " did not start"
                        + exited + " (its traceback is in the TaskManager's stderr)", e);
            }
            return worker;
        }

        byte[] call(String method, byte[] payload) {
            try {
                frame(method.getBytes(StandardCharsets.UTF_8));
                frame(payload);
                return answer(method);
            } catch (IOException e) {
                throw new IllegalStateException("the Python worker process failed in " + method
                        + exited() + " (its traceback is in the TaskManager's stderr)", e);
            }
        }

        private void frame(byte[] bytes) throws IOException {
            in.writeInt(bytes.length);
            in.write(bytes);
        }

        private byte[] answer(String what) throws IOException {
            in.flush();
            int status = out.readUnsignedByte();
            byte[] bytes = new byte[out.readInt()];
            out.readFully(bytes);
            if (status != 0) {
                throw new IllegalStateException("Python failed in " + what + ":\n"
                        + new String(bytes, StandardCharsets.UTF_8));
            }
            return bytes;
        }

        private String exited() {
            try {
                if (process.waitFor(1, TimeUnit.SECONDS)) {
                    return ", it exited with " + process.exitValue();
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return "";
        }

        /** Ended at once: the task was cancelled, or the worker failed to start. */
        void destroy() {
            process.destroyForcibly();
        }

        void close() throws InterruptedException {
            try {
                in.close();  // end of input: the worker returns
            } catch (IOException e) {
                // already gone
            }
            if (!process.waitFor(10, TimeUnit.SECONDS)) {
                process.destroyForcibly();
                process.waitFor(10, TimeUnit.SECONDS);
            }
        }
    }

    private static String pythonString(String text) {
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'";
    }

    /** PyFlink's tally of the jobs' working directories on this TaskManager and its lock
     * ({@code AbstractEmbeddedPythonFunctionOperator}'s private statics, flink-python 2.2.1):
     * the batched operators take part in it as one of PyFlink's operators would. */
    @SuppressWarnings("unchecked")
    private static final class PyFlinkWorkingDirectories {
        static final Map<JobID, Tuple2<String, Integer>> TALLY =
                (Map<JobID, Tuple2<String, Integer>>) staticField("workingDirectories");
        static final ReentrantLock LOCK = (ReentrantLock) staticField("lock");

        private static Object staticField(String name) {
            try {
                Field field = AbstractEmbeddedPythonFunctionOperator.class.getDeclaredField(name);
                field.setAccessible(true);
                return field.get(null);
            } catch (ReflectiveOperationException e) {
                throw new IllegalStateException("flink-python's AbstractEmbeddedPythonFunctionOperator"
                        + " has no static " + name + " (a Flink other than 2.2?)", e);
            }
        }
    }
}
