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
      try {
        System.load(path);
      } catch (UnsatisfiedLinkError e) {
        throw linkError("cannot load the JNI library at -Dtern.library=" + path, e);
      }
    } else {
      try {
        System.loadLibrary("tern_jni");
      } catch (UnsatisfiedLinkError e) {
        throw linkError("cannot load libtern_jni.so", e);
      }
    }
  }

  private static UnsatisfiedLinkError linkError(String what, UnsatisfiedLinkError cause) {
    UnsatisfiedLinkError e = new UnsatisfiedLinkError(
        "Tern: " + what + ": " + cause.getMessage()
        + ". Give its folder with -Djava.library.path=DIR, or the file with -Dtern.library=/path/to/libtern_jni.so"
        + " (a CMake build with -DTERN_BUILD_JAVA=ON puts it in build/release/bindings/java/).");
    e.initCause(cause);
    return e;
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
