package dev.tern;

/**
 * Loads the native library and gives what is not tied to a model. The library is
 * {@code libtern_jni.so}: found on {@code java.library.path}, or at the path in the system
 * property {@code tern.library} when set.
 */
public final class Tern {
  private Tern() {}

  static {
    String path = System.getProperty("tern.library");
    if (path != null && !path.isEmpty()) {
      System.load(path);
    } else {
      System.loadLibrary("tern_jni");
    }
  }

  /** Makes sure the native library is loaded (every class that calls into it does this). */
  static void load() {}

  public static native String version();

  /** Bytes this process can still get without being killed for memory (Linux, Android, iOS). */
  public static native long availableMemory() throws TernException;

  /** "512M", "1.5G", "available", "available-25%": a memory budget in bytes. */
  public static native long parseMemoryBudget(String text) throws TernException;

  /** The GBNF grammar of the JSON that validates against a JSON Schema (tern_json_schema_to_grammar). */
  public static native String jsonSchemaToGrammar(String schema) throws TernException;
}
