package dev.tern;

import java.util.List;

/**
 * One turn of a conversation: its role ("system", "developer", "user", "assistant" or
 * "tool"), its text, an assistant's tool calls, and the call a tool's result answers.
 * {@link Model#applyChat} renders role and content; {@link Session#complete} all of it.
 */
public record ChatMessage(String role, String content, List<ToolCall> toolCalls, String toolCallId) {
  /** toolCalls null: none. */
  public ChatMessage {
    toolCalls = toolCalls == null ? List.of() : List.copyOf(toolCalls);
  }

  public ChatMessage(String role, String content) {
    this(role, content, List.of(), null);
  }

  public static ChatMessage system(String content) {
    return new ChatMessage("system", content);
  }

  /** Rendered as "system" (the chat formats have no developer turn). */
  public static ChatMessage developer(String content) {
    return new ChatMessage("developer", content);
  }

  public static ChatMessage user(String content) {
    return new ChatMessage("user", content);
  }

  public static ChatMessage assistant(String content) {
    return new ChatMessage("assistant", content);
  }

  /** An assistant turn that called tools (no text), e.g. {@link ChatResult#toolCalls}. */
  public static ChatMessage assistant(List<ToolCall> toolCalls) {
    return new ChatMessage("assistant", null, toolCalls, null);
  }

  /** A tool's result; toolCallId (may be null) names the call it answers and is not shown to the model. */
  public static ChatMessage tool(String toolCallId, String content) {
    return new ChatMessage("tool", content, List.of(), toolCallId);
  }
}
