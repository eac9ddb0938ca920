package dev.tern;

import java.util.ArrayList;
import java.util.List;

/**
 * A loaded bundle: weights mapped once, memory planned once. Sessions come from
 * {@link #newSession}; up to {@link ModelParams#sessions} at a time, each usable from its own
 * thread. Close the model when done (closing closes its sessions; closing twice is harmless).
 */
public final class Model implements AutoCloseable {
  static {
    Tern.load();
  }

  private long handle;
  private final List<Session> sessions = new ArrayList<>();
  private Session embedSession;  // Model.embed's, created on first use

  private Model(long handle) {
    this.handle = handle;
  }

  public static Model load(String path, ModelParams params) throws TernException {
    return new Model(nativeLoad(path, params == null ? new ModelParams() : params));
  }

  /** What loading `path` would plan for each KV mode (null or none: the standard set). */
  public static Plan[] plan(String path, ModelParams params, String... kvModes) throws TernException {
    return nativePlan(path, params == null ? new ModelParams() : params, kvModes == null ? new String[0] : kvModes);
  }

  public synchronized Session newSession(SamplerParams sampler) throws TernException {
    final Session s = new Session(this, nativeSessionCreate(handle(), sampler == null ? new SamplerParams() : sampler));
    sessions.add(s);
    return s;
  }

  /** Length of an embedding model's vectors; 0 for a model that generates text. */
  public int embeddingDimensions() throws TernException {
    return nativeEmbeddingDimensions(handle());
  }

  /**
   * An embedding model's vectors for `texts` (L2-normalized, the bundle's pooling), one per
   * text, through a session this model keeps for it (created on first use, so it takes one of
   * the {@link ModelParams#sessions} slots). Texts share forward passes. Thread-safe: calls
   * on one model run one at a time; for parallel embedding use a Session per thread.
   */
  public synchronized float[][] embed(String... texts) throws TernException {
    return embed(texts, 0, null, null, false);
  }

  /** {@link #embed(String...)} with the first `dimensions` dimensions (re-normalized; 0: all), a
   * stored prompt (null: the bundle's default, "": none) or an explicit instruction, and
   * truncation of texts longer than the context. */
  public synchronized float[][] embed(String[] texts, int dimensions, String promptName, String instruction,
      boolean truncate) throws TernException {
    if (embedSession == null) embedSession = newSession(null);
    return embedSession.embed(texts, dimensions, promptName, instruction, truncate);
  }

  /** Text to token ids (addBos: a BOS first; parseSpecial: "<|eot_id|>" becomes its id). */
  public int[] tokenize(String text, boolean addBos, boolean parseSpecial) throws TernException {
    return nativeTokenize(handle(), text, addBos, parseSpecial);
  }

  public String detokenize(int[] tokens) throws TernException {
    return nativeDetokenize(handle(), tokens);
  }

  /**
   * The conversation in the model's chat format, ready for {@link Session#generate} (no BOS
   * added). Roles and texts only: a conversation with tool calls goes to {@link Session#complete}.
   */
  public String applyChat(List<ChatMessage> messages, boolean addAssistantPrefix) throws TernException {
    final String[] roles = new String[messages.size()];
    final String[] contents = new String[messages.size()];
    for (int i = 0; i < roles.length; ++i) {
      if (!messages.get(i).toolCalls().isEmpty()) {
        throw new TernException(2, "INVALID_ARGUMENT", "message " + i + " has tool calls: use Session.complete");
      }
      roles[i] = messages.get(i).role();
      contents[i] = messages.get(i).content();
    }
    return nativeChatApply(handle(), roles, contents, addAssistantPrefix);
  }

  /** "llama3", "bitnet-2b4t" or "plain". */
  public String chatFormat() throws TernException {
    return nativeChatFormat(handle());
  }

  /** Positions each session's KV cache holds at once. */
  public int contextTokens() throws TernException {
    return nativeContextTokens(handle());
  }

  public int vocabSize() throws TernException {
    return nativeVocabSize(handle());
  }

  /** Bytes the arena uses now (every session included). */
  public long arenaUsedBytes() throws TernException {
    return nativeArenaUsedBytes(handle());
  }

  @Override
  public synchronized void close() {
    for (Session s : new ArrayList<>(sessions)) s.close();
    sessions.clear();
    embedSession = null;
    if (handle != 0) {
      nativeFree(handle);
      handle = 0;
    }
  }

  synchronized void forget(Session s) {
    sessions.remove(s);
  }

  synchronized long handle() throws TernException {
    if (handle == 0) throw new TernException(6, "INVALID_STATE", "the model is closed");
    return handle;
  }

  private static native long nativeLoad(String path, ModelParams params) throws TernException;
  private static native Plan[] nativePlan(String path, ModelParams params, String[] modes) throws TernException;
  private static native void nativeFree(long handle);
  private static native long nativeSessionCreate(long model, SamplerParams sampler) throws TernException;
  private static native int[] nativeTokenize(long model, String text, boolean addBos, boolean parseSpecial)
      throws TernException;
  private static native String nativeDetokenize(long model, int[] tokens) throws TernException;
  private static native String nativeChatApply(long model, String[] roles, String[] contents, boolean addPrefix)
      throws TernException;
  private static native String nativeChatFormat(long model) throws TernException;
  private static native int nativeContextTokens(long model) throws TernException;
  private static native int nativeVocabSize(long model) throws TernException;
  private static native long nativeArenaUsedBytes(long model) throws TernException;
  private static native int nativeEmbeddingDimensions(long model) throws TernException;
}
