package io.modstream.flink;

import java.io.DataInputStream;
import java.nio.charset.StandardCharsets;

import org.apache.flink.runtime.checkpoint.Checkpoints;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.jobgraph.OperatorID;
import org.apache.flink.runtime.state.CompletedCheckpointStorageLocation;
import org.apache.flink.runtime.state.filesystem.AbstractFsCheckpointStorageAccess;
import org.apache.flink.shaded.guava33.com.google.common.hash.Hashing;

/**
 * Whether a checkpoint or savepoint holds state for an operator uid: the job wires the
 * operators that read another engine's state only when there is some to read (issue 26).
 */
public final class SavepointUids {
    private SavepointUids() {}

    /** The operator id Flink derives from a user-set uid (StreamGraphHasherV2). */
    public static OperatorID operatorId(String uid) {
        return new OperatorID(Hashing.murmur3_128(0).newHasher()
                .putString(uid, StandardCharsets.UTF_8).hash().asBytes());
    }

    /** True when the checkpoint at {@code pointer} (its directory or its _metadata) holds
     * state of the operator with uid {@code uid}. */
    public static boolean holds(String pointer, String uid) throws Exception {
        CompletedCheckpointStorageLocation location =
                AbstractFsCheckpointStorageAccess.resolveCheckpointPointer(pointer);
        CheckpointMetadata metadata;
        try (DataInputStream in =
                new DataInputStream(location.getMetadataHandle().openInputStream())) {
            metadata = Checkpoints.loadCheckpointMetadata(
                    in, SavepointUids.class.getClassLoader(), pointer);
        }
        OperatorID wanted = operatorId(uid);
        for (OperatorState operator : metadata.getOperatorStates()) {
            if (operator.getOperatorID().equals(wanted)) {
                for (OperatorSubtaskState subtask : operator.getStates()) {
                    if (subtask.hasState()) {
                        return true;
                    }
                }
            }
        }
        return false;
    }
}
