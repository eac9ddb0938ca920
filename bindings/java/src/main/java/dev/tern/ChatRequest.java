package dev.tern;

import java.util.ArrayList;
import java.util.List;

/**
 * One OpenAI-shaped request for {@link Session#complete}: a chat (messages, with tools,
 * toolChoice and responseFormat) or a completion (a raw prompt), with its own sampler, logit
 * bias, stop strings, maxTokens and logprobs. Immutable; built with {@link #builder()}. The
 * semantics are tern.h's "Chat completions" (tern_chat_request).
 */
public final class ChatRequest {
  private final List<ChatMessage> messages;
  private final List<Tool> tools;

  // What the JNI layer reads (bindings/java/jni), flattened: message i has callCounts[i] of
  // the calls, in order.
  final String[] roles;
  final String[] contents;
  final String[] toolCallIds;
  final int[] callCounts;
  final String[] callIds;
  final String[] callNames;
  final String[] callArguments;
  final String prompt;
  final String[] toolNames;
  final String[] toolDescriptions;
  final String[] toolParameters;
  final int toolChoice;
  final String toolChoiceName;
  final int responseFormat;
  final String responseText;
  final SamplerParams sampler;
  final int[] biasTokens;
  final float[] biasValues;
  final String[] stop;
  final int maxTokens;
  final boolean logprobs;
  final int topLogprobs;

  private ChatRequest(Builder b) {
    messages = List.copyOf(b.messages);
    tools = List.copyOf(b.tools);
    final int n = messages.size();
    roles = new String[n];
    contents = new String[n];
    toolCallIds = new String[n];
    callCounts = new int[n];
    final List<ToolCall> calls = new ArrayList<>();
    for (int i = 0; i < n; ++i) {
      final ChatMessage m = messages.get(i);
      roles[i] = m.role();
      contents[i] = m.content();
      toolCallIds[i] = m.toolCallId();
      callCounts[i] = m.toolCalls().size();
      calls.addAll(m.toolCalls());
    }
    callIds = calls.stream().map(ToolCall::id).toArray(String[]::new);
    callNames = calls.stream().map(ToolCall::name).toArray(String[]::new);
    callArguments = calls.stream().map(ToolCall::arguments).toArray(String[]::new);
    prompt = b.prompt;
    toolNames = tools.stream().map(Tool::name).toArray(String[]::new);
    toolDescriptions = tools.stream().map(Tool::description).toArray(String[]::new);
    toolParameters = tools.stream().map(Tool::parameters).toArray(String[]::new);
    toolChoice = b.toolChoice.kind;
    toolChoiceName = b.toolChoice.name;
    responseFormat = b.responseFormat.kind;
    responseText = b.responseFormat.text;
    sampler = b.sampler.copy();
    biasTokens = new int[b.biasTokens.size()];
    biasValues = new float[b.biasValues.size()];
    for (int i = 0; i < biasTokens.length; ++i) {
      biasTokens[i] = b.biasTokens.get(i);
      biasValues[i] = b.biasValues.get(i);
    }
    stop = b.stop.toArray(new String[0]);
    maxTokens = b.maxTokens;
    logprobs = b.logprobs;
    topLogprobs = b.topLogprobs;
  }

  public static Builder builder() {
    return new Builder();
  }

  public List<ChatMessage> messages() {
    return messages;
  }

  public List<Tool> tools() {
    return tools;
  }

  /** Setters return this; build() copies, so a builder can go on to make the next request. */
  public static final class Builder {
    private final List<ChatMessage> messages = new ArrayList<>();
    private final List<Tool> tools = new ArrayList<>();
    private String prompt = null;
    private ToolChoice toolChoice = ToolChoice.AUTO;
    private ResponseFormat responseFormat = ResponseFormat.TEXT;
    private SamplerParams sampler = new SamplerParams();
    private final List<Integer> biasTokens = new ArrayList<>();
    private final List<Float> biasValues = new ArrayList<>();
    private final List<String> stop = new ArrayList<>();
    private int maxTokens = 0;
    private boolean logprobs = false;
    private int topLogprobs = 0;

    private Builder() {}

    public Builder message(ChatMessage message) {
      messages.add(message);
      return this;
    }

    public Builder messages(List<ChatMessage> list) {
      messages.addAll(list);
      return this;
    }

    public Builder system(String content) {
      return message(ChatMessage.system(content));
    }

    public Builder developer(String content) {
      return message(ChatMessage.developer(content));
    }

    public Builder user(String content) {
      return message(ChatMessage.user(content));
    }

    public Builder assistant(String content) {
      return message(ChatMessage.assistant(content));
    }

    /**
     * A completion instead of a chat: raw text, after a BOS when the model adds one (special
     * token text becomes control tokens). Ignored when there are messages.
     */
    public Builder prompt(String text) {
      this.prompt = text;
      return this;
    }

    public Builder tool(Tool tool) {
      tools.add(tool);
      return this;
    }

    /** {@link Tool}: parameters is the JSON Schema text of the arguments (null: any object). */
    public Builder tool(String name, String description, String parameters) {
      return tool(new Tool(name, description, parameters));
    }

    public Builder toolChoice(ToolChoice choice) {
      this.toolChoice = choice == null ? ToolChoice.AUTO : choice;
      return this;
    }

    public Builder responseFormat(ResponseFormat format) {
      this.responseFormat = format == null ? ResponseFormat.TEXT : format;
      return this;
    }

    /**
     * Sampling for this call (copied); the seed makes it repeatable. Its grammar and
     * jsonSchema must be unset: {@link #responseFormat} constrains a chat reply.
     */
    public Builder sampler(SamplerParams params) {
      this.sampler = params == null ? new SamplerParams() : params.copy();
      return this;
    }

    /** Adds `bias` to the token's logit before sampling (-Infinity bans it). */
    public Builder logitBias(int token, float bias) {
      biasTokens.add(token);
      biasValues.add(bias);
      return this;
    }

    /** Stop strings (at most 8 with the chat format's own, each at most 64 bytes), not part of the reply. */
    public Builder stop(String... strings) {
      stop.addAll(List.of(strings));
      return this;
    }

    /** 0: up to the context. */
    public Builder maxTokens(int tokens) {
      this.maxTokens = tokens;
      return this;
    }

    /** A {@link TokenLogprob} per generated token ({@link ChatListener#onToken}, {@link ChatResult#logprobs}). */
    public Builder logprobs(boolean on) {
      this.logprobs = on;
      return this;
    }

    /** With logprobs: the N most likely alternatives per token (at most 20). */
    public Builder topLogprobs(int n) {
      this.topLogprobs = n;
      return this;
    }

    public ChatRequest build() {
      return new ChatRequest(this);
    }
  }
}
