package dev.tern;

/** One KV mode's memory plan: what {@link Model#plan} says loading would give. */
public record Plan(String kvMode, int status, String statusName, int contextTokens, double kvBytesPerToken,
                   long weightsBytes, long arenaBytes, long kvBytes, long totalBytes, long minimumBudgetBytes,
                   long sessionBytes, int sessionsThatFit) {
  public boolean ok() {
    return status == 0;
  }
}
