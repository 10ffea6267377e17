package io.modstream.flink;

import java.io.Serializable;
import java.lang.reflect.Field;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.locks.ReentrantLock;

import org.apache.flink.api.common.JobID;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.configuration.Configuration;
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
 */
public final class EmbeddedPython implements Serializable {
    private static final long serialVersionUID = 1L;
    private final Configuration pythonConfig;

    private transient EmbeddedPythonEnvironmentManager environmentManager;
    private transient PythonInterpreter interpreter;
    private transient JobID job;
    private transient boolean inWorkingDirectory;

    private EmbeddedPython(Configuration pythonConfig) {
        this.pythonConfig = pythonConfig;
    }

    /** The Python configuration of the job being built in {@code env}, as PyFlink hands it to
     * its own operators. */
    public static EmbeddedPython of(StreamExecutionEnvironment env) {
        Configuration config = PythonConfigUtil.extractPythonConfiguration(env.getConfiguration());
        // Ours are embedded whatever PyFlink's own operators use: with the job in process mode
        // (--flink-conf python.execution-mode=process) the environment manager refused to
        // open ("Unsupported execution mode process") and the job restarted forever.
        config.set(PythonOptions.PYTHON_EXECUTION_MODE, "thread");
        return new EmbeddedPython(config);
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
        EmbeddedPythonEnvironment environment =
                (EmbeddedPythonEnvironment) environmentManager.createEnvironment();
        interpreter = new PythonInterpreter(environment.getConfig());
        String workingDirectory =
                environment.getEnv().get(AbstractPythonEnvironmentManager.PYTHON_WORKING_DIR);
        if (workingDirectory != null) {
            enterWorkingDirectory(workingDirectory);
        }
        return interpreter;
    }

    /** In the interpreter {@link #open} made: {@code module.cls(pickledConfig, subtask)}, kept
     * under a name of its own ({@code prefix}, the subtask, {@code owner}'s identity); the name
     * its methods are called by ({@link #call}). */
    public String instantiate(String prefix, Object owner, String module, String cls,
            byte[] pickledConfig, int subtask) {
        String name = prefix + subtask + "_" + System.identityHashCode(owner);
        interpreter.set(name + "_config", pickledConfig);
        interpreter.exec("import " + module + " as " + name + "_module\n"
                + name + " = " + name + "_module." + cls + "(" + name + "_config, " + subtask + ")");
        return name;
    }

    /** {@code handler.method(payload)} ({@link #instantiate}'s name): the bytes it answers. */
    public byte[] call(String handler, String method, byte[] payload) {
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
