package dev.tern;

/** One turn of a conversation: role "system", "user" or "assistant", and its text. */
public record ChatMessage(String role, String content) {
  public static ChatMessage system(String content) {
    return new ChatMessage("system", content);
  }

  public static ChatMessage user(String content) {
    return new ChatMessage("user", content);
  }

  public static ChatMessage assistant(String content) {
    return new ChatMessage("assistant", content);
  }
}
