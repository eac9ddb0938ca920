package dev.tern;

/**
 * A function call: an assistant's earlier call in a {@link ChatMessage}, or one the model made
 * ({@link ChatResult#toolCalls}). id is not shown to the model (may be null); arguments is
 * JSON text.
 */
public record ToolCall(String id, String name, String arguments) {
  public static ToolCall of(String name, String arguments) {
    return new ToolCall(null, name, arguments);
  }
}
