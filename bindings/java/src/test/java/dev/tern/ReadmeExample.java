package dev.tern;

// bindings/java/README.md's quick start (Hello.java) holds the code between the markers
// verbatim, at this indentation (java_readme_example_test checks that).
final class ReadmeExample {
  static String run(String bundlePath) throws TernException {
    // readme-example-begin
    try (Model model = Model.load(bundlePath, new ModelParams().memoryBudget(Tern.parseMemoryBudget("available-25%")));
         Session session = model.newSession(new SamplerParams().temperature(0.7f).seed(42))) {
      String prompt = model.applyChat(java.util.List.of(ChatMessage.user("Who is Emma?")), true);
      StringBuilder reply = new StringBuilder();
      session.generate(prompt, 48, false, piece -> {
        reply.append(piece);  // stream it to the UI as it comes
        return true;          // false stops generation
      });
      return reply.toString();
    }
    // readme-example-end
  }
}
