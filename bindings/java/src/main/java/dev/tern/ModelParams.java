package dev.tern;

/** How a model is loaded: mirrors {@code tern_model_params}; setters return this. */
public final class ModelParams {
  long memoryBudgetBytes = 0;
  int threads = 1;
  int contextTokens = 0;
  int batchTokens = 64;
  String kvMode = null;
  int kvSinkTokens = -1;
  int kvRecentWindow = -1;
  int kvEviction = -1;
  int sessions = 1;
  long grammarBytes = GRAMMAR_MEMORY_AUTO;

  /** {@link #grammarMemory}: sized by the vocabulary for a JSON grammar (the default). */
  public static final long GRAMMAR_MEMORY_AUTO = -1;

  /** Bytes the process may use (0: no limit); see {@link Tern#parseMemoryBudget}. */
  public ModelParams memoryBudget(long bytes) {
    this.memoryBudgetBytes = bytes;
    return this;
  }

  /** Compute threads (0: one per available core; more is clamped to the cores). */
  public ModelParams threads(int threads) {
    this.threads = threads;
    return this;
  }

  /** Context tokens per session (0: as many as the budget allows, up to the model's). */
  public ModelParams contextTokens(int tokens) {
    this.contextTokens = tokens;
    return this;
  }

  public ModelParams batchTokens(int tokens) {
    this.batchTokens = tokens;
    return this;
  }

  /** "f32", "fp16", "q8", "q4", "q3", "q2", "k4v2", "adaptive:B" (null: the default, fp16). */
  public ModelParams kvMode(String mode) {
    this.kvMode = mode;
    return this;
  }

  public ModelParams kvSinkTokens(int tokens) {
    this.kvSinkTokens = tokens;
    return this;
  }

  public ModelParams kvRecentWindow(int tokens) {
    this.kvRecentWindow = tokens;
    return this;
  }

  /** -1: the mode's default, 0: off, 1: on. */
  public ModelParams kvEviction(int eviction) {
    this.kvEviction = eviction;
    return this;
  }

  /** Sessions the model holds at once, each with its own slot of the budget. */
  public ModelParams sessions(int sessions) {
    this.sessions = sessions;
    return this;
  }

  /**
   * Memory per session for a compiled grammar ({@link SamplerParams#grammar}, {@link
   * SamplerParams#jsonSchema}, chat requests' response formats and tools), inside the budget;
   * {@link #GRAMMAR_MEMORY_AUTO} (the default): sized by the vocabulary (2 MiB and 48 bytes per
   * token); 0: sessions take no grammar.
   */
  public ModelParams grammarMemory(long bytes) {
    this.grammarBytes = bytes;
    return this;
  }
}
