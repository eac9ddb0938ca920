package dev.tern;

// bindings/java/README.md holds the code between each pair of markers verbatim, at this
// indentation (java_readme_example_test checks that): run is the quick start (Hello.java),
// weather the tool call example (Weather.java).
final class ReadmeExample {
  static String run(String bundlePath) throws TernException {
    // readme-example-begin
    try (Model model = Model.load(bundlePath, new ModelParams().memoryBudget(Tern.parseMemoryBudget("available-25%")));
         Session session = model.newSession(null)) {
      ChatRequest request = ChatRequest.builder()
                                .system("You are brief.")
                                .user("Who is Emma?")
                                .sampler(new SamplerParams().temperature(0.7f).seed(42))
                                .maxTokens(48)
                                .build();
      StringBuilder reply = new StringBuilder();
      session.complete(request, ChatListener.content(piece -> {
        reply.append(piece);  // stream it to the UI as it comes
        return true;          // false stops generation
      }));
      return reply.toString();
    }
    // readme-example-end
  }

  static String weather(String bundlePath) throws TernException {
    // readme-example-begin
    String parameters = "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}},"
                        + " \"required\": [\"city\"], \"additionalProperties\": false}";
    try (Model model = Model.load(bundlePath, new ModelParams().grammarMemory(4L << 20));
         Session session = model.newSession(null)) {
      ChatRequest.Builder chat = ChatRequest.builder()
                                     .user("What is the weather in Bath?")
                                     .tool("get_weather", "The forecast for a city", parameters)
                                     .maxTokens(64);
      ChatResult first = session.complete(chat.toolChoice(ToolChoice.REQUIRED).build(), null);
      ToolCall call = first.toolCalls().get(0);  // name "get_weather", arguments {"city": "..."}
      String forecast = "{\"forecast\": \"rain\"}";  // what calling it gave
      chat.message(ChatMessage.assistant(first.toolCalls())).message(ChatMessage.tool(call.id(), forecast));
      ChatResult answer = session.complete(chat.toolChoice(ToolChoice.AUTO).build(), null);
      return answer.content();  // "" if it is another call; answer.cachedTokens(): the first turn's, reused
    }
    // readme-example-end
  }
}
