package dev.tern;

/**
 * One conversation. Drive it from one thread at a time; {@link #abort} may be called from any
 * thread and makes a running {@link #generate} or {@link #complete} throw ABORTED. Closing
 * twice is harmless; any other call after close throws INVALID_STATE.
 */
public final class Session implements AutoCloseable {
  static {
    Tern.load();
  }

  private final Model model;
  private volatile long handle;

  Session(Model model, long handle) {
    this.model = model;
    this.handle = handle;
  }

  /**
   * Tokenizes the prompt, runs it and generates up to maxTokens, streaming text to listener
   * (may be null). Returns the text generated. addBos: only when the session is empty.
   */
  public synchronized String generate(String prompt, int maxTokens, boolean addBos, TokenListener listener)
      throws TernException {
    return nativeGenerate(handle(), prompt, maxTokens, addBos, listener);
  }

  /**
   * Runs a whole chat (or completion) request: the prompt rendered in the model's chat format
   * with its tools, the reply constrained to a tool call or the response format, streamed to
   * listener (may be null). Stateless: the reply depends only on the request (equal seeded
   * requests give equal replies); the session is a cache whose tokens that begin the new
   * prompt are reused (cachedTokens) and which afterwards holds the prompt and the reply.
   * The request's sampler and logit bias stay set on the session. Bad requests throw
   * INVALID_ARGUMENT naming the field; schemas and grammars need {@link ModelParams#grammarMemory}.
   */
  public synchronized ChatResult complete(ChatRequest request, ChatListener listener) throws TernException {
    if (request == null) throw new TernException(2, "INVALID_ARGUMENT", "the request is null");
    if (request.sampler.grammar != null || request.sampler.jsonSchema != null) {
      throw new TernException(2, "INVALID_ARGUMENT",
                              "the request's sampler has a grammar or jsonSchema: give a responseFormat instead");
    }
    final ChatCollector collector = new ChatCollector(listener);
    return collector.result(nativeComplete(handle(), request, collector));
  }

  /**
   * Embedding models: one L2-normalized vector per text, the texts run through the model in
   * batches (see {@link Model#embed}). dimensions 0: the model's; promptName: a prompt stored
   * in the bundle (null: its default, "": none); instruction: text put in front instead (null:
   * none); truncate: cut texts longer than the context instead of throwing PROMPT_TOO_LONG.
   */
  public synchronized float[][] embed(String[] texts, int dimensions, String promptName, String instruction,
      boolean truncate) throws TernException {
    if (texts == null) throw new TernException(2, "INVALID_ARGUMENT", "texts is null");
    final int dims = dimensions > 0 ? dimensions : model.embeddingDimensions();
    if (dims == 0) throw new TernException(3, "NOT_SUPPORTED", "not an embedding model (it generates text)");
    final float[] flat = nativeEmbed(handle(), texts, dimensions, dims, promptName, instruction, truncate);
    final float[][] out = new float[texts.length][];
    for (int i = 0; i < texts.length; ++i) out[i] = java.util.Arrays.copyOfRange(flat, i * dims, (i + 1) * dims);
    return out;
  }

  /** Generate with a BOS for a new conversation and no listener. */
  public String generate(String prompt, int maxTokens) throws TernException {
    return generate(prompt, maxTokens, true, null);
  }

  /** Stops a running generate (from any thread); stays in effect until reset(). */
  public void abort() {
    final long h = handle;
    if (h != 0) nativeAbort(h);
  }

  /** Forgets the conversation (and an abort request). */
  public synchronized void reset() throws TernException {
    nativeReset(handle());
  }

  /** Keeps the first n tokens (regenerate, edit the last turn). */
  public synchronized void truncate(int n) throws TernException {
    nativeTruncate(handle(), n);
  }

  public synchronized int position() throws TernException {
    return nativePosition(handle());
  }

  public synchronized void setSampler(SamplerParams sampler) throws TernException {
    nativeSetSampler(handle(), sampler);
  }

  /** Token ids and their additive biases applied before sampling (-Infinity bans; null clears). */
  public synchronized void setLogitBias(int[] tokens, float[] biases) throws TernException {
    nativeSetLogitBias(handle(), tokens == null ? new int[0] : tokens, biases == null ? new float[0] : biases);
  }

  /** The conversation as bytes, to resume later with {@link #loadState(byte[])}. */
  public synchronized byte[] saveState() throws TernException {
    return nativeSaveState(handle());
  }

  public synchronized void loadState(byte[] state) throws TernException {
    nativeLoadState(handle(), state);
  }

  public synchronized void saveState(String path) throws TernException {
    nativeSaveStateFile(handle(), path);
  }

  public synchronized void loadState(String path) throws TernException {
    nativeLoadStateFile(handle(), path);
  }

  @Override
  public void close() {
    synchronized (this) {
      final long h = handle;
      handle = 0;
      if (h != 0) nativeFree(h);
    }
    model.forget(this);
  }

  private long handle() throws TernException {
    final long h = handle;
    if (h == 0) throw new TernException(6, "INVALID_STATE", "the session is closed");
    return h;
  }

  private static native float[] nativeEmbed(long session, String[] texts, int dimensions, int rowFloats,
      String promptName, String instruction, boolean truncate) throws TernException;
  private static native String nativeGenerate(long session, String prompt, int maxTokens, boolean addBos,
                                              TokenListener listener) throws TernException;
  private static native double[] nativeComplete(long session, ChatRequest request, ChatCollector collector)
      throws TernException;
  private static native void nativeAbort(long session);
  private static native void nativeReset(long session) throws TernException;
  private static native void nativeTruncate(long session, int n) throws TernException;
  private static native int nativePosition(long session) throws TernException;
  private static native void nativeSetSampler(long session, SamplerParams sampler) throws TernException;
  private static native void nativeSetLogitBias(long session, int[] tokens, float[] biases) throws TernException;
  private static native byte[] nativeSaveState(long session) throws TernException;
  private static native void nativeLoadState(long session, byte[] state) throws TernException;
  private static native void nativeSaveStateFile(long session, String path) throws TernException;
  private static native void nativeLoadStateFile(long session, String path) throws TernException;
  private static native void nativeFree(long session);
}
