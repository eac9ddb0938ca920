package dev.tern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Session.complete on the chat test bundle (tiny-austen-2b4t-chat, system property
 * tern.chat.bundle): replies parsed back with a JSON reader of the test's own (Json.java) and
 * checked against the request's schemas, the prompt against Model.applyChat of the same
 * conversation written out by hand, and streamed events against the result.
 */
class ChatTest {
  static final String WEATHER = "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":12},"
      + "\"days\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":7}},\"required\":[\"city\",\"days\"],"
      + "\"additionalProperties\":false}";
  static Model model;

  @BeforeAll
  static void load() throws TernException {
    final String bundle = System.getProperty("tern.chat.bundle", "");
    assertTrue(Files.exists(Path.of(bundle)), "bundle not converted (ctest's runtime_make_bundles does): " + bundle);
    model = Model.load(bundle, new ModelParams().threads(1).contextTokens(512).grammarMemory(4L << 20).sessions(2));
  }

  @AfterAll
  static void close() {
    if (model != null) model.close();
  }

  static SamplerParams seeded(long seed) {
    return new SamplerParams().temperature(0.9f).seed(seed);
  }

  /** Everything a listener was told, in order. */
  static final class Events implements ChatListener {
    final StringBuilder content = new StringBuilder();
    final List<String> names = new ArrayList<>();
    final StringBuilder arguments = new StringBuilder();
    final List<TokenLogprob> chosen = new ArrayList<>();
    final List<TokenLogprob[]> top = new ArrayList<>();
    int contentPieces = 0;

    @Override
    public boolean onContent(String text) {
      content.append(text);
      ++contentPieces;
      return true;
    }

    @Override
    public boolean onToolCall(int index, String name) {
      assertEquals(0, index);
      names.add(name);
      return true;
    }

    @Override
    public boolean onToolArguments(int index, String text) {
      assertEquals(0, index);
      arguments.append(text);
      return true;
    }

    @Override
    public boolean onToken(TokenLogprob token, TokenLogprob[] alternatives) {
      chosen.add(token);
      top.add(alternatives);
      return true;
    }
  }

  @SuppressWarnings("unchecked")
  static Map<String, Object> object(String json) {
    final Object v = Json.parse(json);
    assertTrue(v instanceof Map, json);
    return (Map<String, Object>) v;
  }

  /** The weather schema's constraints, checked by hand. */
  static void assertWeather(String json) {
    final Map<String, Object> args = object(json);
    assertEquals(java.util.Set.of("city", "days"), args.keySet(), json);
    assertTrue(args.get("city") instanceof String city && city.codePointCount(0, city.length()) <= 12, json);
    final double days = (Double) args.get("days");
    assertTrue(days == Math.rint(days) && days >= 1 && days <= 7, json);
  }

  @Test
  void aRequiredToolCallParsesBack() throws Exception {
    try (Session s = model.newSession(null)) {
      for (long seed = 1; seed <= 3; ++seed) {
        final Events events = new Events();
        final ChatResult r = s.complete(ChatRequest.builder()
                                            .user("Weather in Oslo for 3 days?")
                                            .tool("get_weather", "The forecast for a city", WEATHER)
                                            .toolChoice(ToolChoice.REQUIRED)
                                            .sampler(seeded(seed))
                                            .maxTokens(96)
                                            .build(),
                                        events);
        assertEquals(ChatResult.FinishReason.TOOL_CALLS, r.finishReason());
        assertEquals(1, r.toolCalls().size());
        assertEquals("get_weather", r.toolCalls().get(0).name());
        assertWeather(r.toolCalls().get(0).arguments());
        assertEquals("", r.content());
        assertEquals(List.of("get_weather"), events.names);
        assertEquals(r.toolCalls().get(0).arguments(), events.arguments.toString());
        assertTrue(r.promptTokens() > 0 && r.completionTokens() > 0, r.toString());
      }
      // Of two tools, the one named.
      final ChatResult named = s.complete(ChatRequest.builder()
                                              .user("What time is it?")
                                              .tool("get_time", null, null)
                                              .tool("get_weather", "The forecast for a city", WEATHER)
                                              .toolChoice(ToolChoice.function("get_weather"))
                                              .sampler(seeded(5))
                                              .maxTokens(96)
                                              .build(),
                                          null);
      assertEquals("get_weather", named.toolCalls().get(0).name());
      assertWeather(named.toolCalls().get(0).arguments());
    }
  }

  @Test
  void aJsonSchemaReplyParses() throws Exception {
    try (Session s = model.newSession(null)) {
      final ChatResult r = s.complete(ChatRequest.builder()
                                          .user("A forecast, please.")
                                          .responseFormat(ResponseFormat.jsonSchema(WEATHER))
                                          .sampler(seeded(7))
                                          .maxTokens(200)
                                          .build(),
                                      null);
      assertEquals(ChatResult.FinishReason.STOP, r.finishReason());
      assertWeather(r.content());
      assertTrue(r.toolCalls().isEmpty());
      // The reader the checks rely on refuses what is not JSON.
      assertThrows(IllegalArgumentException.class, () -> Json.parse("{\"city\": \"Bath\""));
      assertThrows(IllegalArgumentException.class, () -> Json.parse("{\"city\": 1,}"));
      assertThrows(IllegalArgumentException.class, () -> Json.parse("{\"city\": 01}"));
      final ChatResult any = s.complete(ChatRequest.builder()
                                            .user("Any object.")
                                            .responseFormat(ResponseFormat.JSON_OBJECT)
                                            .sampler(seeded(8))
                                            .maxTokens(200)
                                            .build(),
                                        null);
      if (any.finishReason() == ChatResult.FinishReason.STOP) object(any.content());
    }
  }

  @Test
  void streamedContentEqualsTheResultAndSeededCallsRepeat() throws Exception {
    final ChatRequest request = ChatRequest.builder()
                                    .user("It is a truth universally acknowledged")
                                    .sampler(new SamplerParams().temperature(1.0f).seed(42))
                                    .maxTokens(24)
                                    .build();
    try (Session s = model.newSession(null)) {
      final Events events = new Events();
      final ChatResult first = s.complete(request, events);
      assertTrue(events.contentPieces > 3, "pieces: " + events.contentPieces);
      assertEquals(first.content(), events.content.toString());
      assertFalse(first.content().isEmpty());
      assertEquals(first.content(), s.complete(request, null).content());
      // A greedy call in between leaves the request's own sampler in charge of the next.
      s.complete(ChatRequest.builder().user("Hi").sampler(new SamplerParams().temperature(0)).maxTokens(4).build(),
                 null);
      assertEquals(first.content(), s.complete(request, null).content());
      // The seed is the request's: another gives another text.
      assertFalse(first.content().equals(s.complete(ChatRequest.builder()
                                                        .user("It is a truth universally acknowledged")
                                                        .sampler(new SamplerParams().temperature(1.0f).seed(43))
                                                        .maxTokens(24)
                                                        .build(),
                                                    null).content()));
      try (Session fresh = model.newSession(null)) {
        final ChatResult again = fresh.complete(request, null);
        assertEquals(first.content(), again.content());
        assertEquals(0, again.cachedTokens());
      }
    }
  }

  @Test
  void aSecondTurnReusesTheFirst() throws Exception {
    try (Session s = model.newSession(null)) {
      final ChatRequest.Builder b = ChatRequest.builder().user("Who is Mr. Darcy?").sampler(
          new SamplerParams().temperature(0)).maxTokens(20);
      final ChatResult one = s.complete(b.build(), null);
      assertEquals(0, one.cachedTokens());
      final ChatResult two = s.complete(b.assistant(one.content()).user("And Elizabeth?").build(), null);
      assertTrue(two.cachedTokens() > one.promptTokens(), two.cachedTokens() + " of " + one.promptTokens());
      assertTrue(two.cachedTokens() < two.promptTokens(), two.toString());
    }
  }

  @Test
  void toolTurnsAreRenderedAsTheChatFormatSaysAndCompletionsNeedNoChat() throws Exception {
    // The conversation as complete() gets it: a developer turn, an earlier call, its result.
    final ChatRequest request = ChatRequest.builder()
                                    .developer("Be brief.")
                                    .user("Weather in Oslo?")
                                    .message(ChatMessage.assistant(List.of(new ToolCall("call_1", "get_time",
                                                                                        "{ \"zone\" : \"UTC\" }"))))
                                    .message(ChatMessage.tool("call_1", "12:00"))
                                    .tool("get_weather", null, WEATHER)
                                    .toolChoice(ToolChoice.NONE)
                                    .maxTokens(1)
                                    .build();
    // By hand: "system", the call as compact JSON, the tools not shown (tool choice none).
    final String call = "{\"name\":\"get_time\",\"arguments\":{\"zone\":\"UTC\"}}";
    final String byHand = model.applyChat(List.of(ChatMessage.system("Be brief."), ChatMessage.user("Weather in Oslo?"),
                                                  ChatMessage.assistant(call), new ChatMessage("tool", "12:00")),
                                          true);
    try (Session s = model.newSession(null)) {
      final ChatResult r = s.complete(request, null);
      assertEquals(model.tokenize(byHand, false, true).length, r.promptTokens());
      assertEquals(r.promptTokens() + 1, s.position());  // the prompt and the one token generated
      final ChatResult completion =
          s.complete(ChatRequest.builder().prompt("It is a truth").maxTokens(5).build(), null);
      assertEquals(ChatResult.FinishReason.LENGTH, completion.finishReason());
      assertEquals(5, completion.completionTokens());
      assertEquals(model.tokenize("It is a truth", true, true).length, completion.promptTokens());
    }
    assertEquals("INVALID_ARGUMENT",
                 assertThrows(TernException.class, () -> model.applyChat(request.messages(), true)).statusName());
  }

  @Test
  void stopStringsAndLogitBiasShapeTheReply() throws Exception {
    final ChatRequest.Builder b =
        ChatRequest.builder().prompt("It is a truth").sampler(new SamplerParams().temperature(0)).maxTokens(24);
    try (Session s = model.newSession(null)) {
      final String full = s.complete(b.build(), null).content();
      assertTrue(full.length() > 12, full);
      final String stop = full.substring(8, 11);
      final ChatResult cut = s.complete(b.stop(stop).build(), null);
      assertEquals(full.substring(0, full.indexOf(stop)), cut.content());
      assertEquals(ChatResult.FinishReason.STOP, cut.finishReason());
      final int emma = model.tokenize(" Emma", false, false)[0];
      final ChatResult forced = s.complete(
          ChatRequest.builder().prompt("It is a truth").logitBias(emma, 100f).maxTokens(3).build(), null);
      assertEquals(model.detokenize(new int[] {emma, emma, emma}), forced.content());
    }
  }

  @Test
  void logprobsDescribeTheTokensGenerated() throws Exception {
    final ChatRequest request = ChatRequest.builder()
                                    .prompt("It is a truth universally")
                                    .sampler(new SamplerParams().temperature(0))
                                    .maxTokens(16)
                                    .logprobs(true)
                                    .topLogprobs(5)
                                    .build();
    try (Session s = model.newSession(null)) {
      final Events events = new Events();
      final ChatResult r = s.complete(request, events);
      assertEquals(ChatResult.FinishReason.LENGTH, r.finishReason());
      assertEquals(16, r.logprobs().size());
      assertEquals(16, events.chosen.size());
      final java.io.ByteArrayOutputStream bytes = new java.io.ByteArrayOutputStream();
      for (int i = 0; i < r.logprobs().size(); ++i) {
        final ChatResult.Logprob lp = r.logprobs().get(i);
        assertSame(events.chosen.get(i), lp.chosen());
        assertEquals(5, lp.top().size());
        assertTrue(lp.chosen().logprob() <= 0f, lp.toString());
        double mass = 0;
        for (int k = 0; k < lp.top().size(); ++k) {
          assertTrue(lp.top().get(k).logprob() <= 0f, lp.toString());
          if (k > 0) assertTrue(lp.top().get(k).logprob() <= lp.top().get(k - 1).logprob(), lp.toString());
          mass += Math.exp(lp.top().get(k).logprob());
        }
        assertTrue(mass <= 1.0 + 1e-4, lp.toString());
        // Greedy: the chosen token is the most likely one.
        assertEquals(lp.top().get(0).token(), lp.chosen().token(), lp.toString());
        assertEquals(lp.top().get(0).logprob(), lp.chosen().logprob(), 1e-6f);
        bytes.writeBytes(lp.chosen().bytes());
      }
      // The chosen tokens' bytes are the reply.
      assertEquals(r.content(), bytes.toString(java.nio.charset.StandardCharsets.UTF_8));
      // A token biased by +100 is all but certain.
      final int emma = model.tokenize(" Emma", false, false)[0];
      final ChatResult forced = s.complete(
          ChatRequest.builder().prompt("It is").logitBias(emma, 100f).maxTokens(2).logprobs(true).build(), null);
      for (ChatResult.Logprob lp : forced.logprobs()) {
        assertEquals(emma, lp.chosen().token());
        assertEquals(0f, lp.chosen().logprob(), 1e-3f);
        assertTrue(lp.top().isEmpty());
      }
    }
  }

  @Test
  void aListenerStopsTheReplyOrThrowsThroughIt() throws Exception {
    final ChatRequest request = ChatRequest.builder().user("Tell me about Emma.").sampler(seeded(3)).maxTokens(40)
                                    .build();
    try (Session s = model.newSession(null)) {
      final List<String> pieces = new ArrayList<>();
      final ChatResult r = s.complete(request, ChatListener.content(piece -> pieces.add(piece) && pieces.size() < 3));
      assertEquals(3, pieces.size());
      assertEquals(String.join("", pieces), r.content());
      assertEquals(ChatResult.FinishReason.STOP, r.finishReason());
      final IllegalStateException thrown = new IllegalStateException("from the listener");
      assertSame(thrown, assertThrows(IllegalStateException.class, () -> s.complete(request, new ChatListener() {
        @Override
        public boolean onContent(String text) {
          throw thrown;
        }
      })));
      assertFalse(s.complete(request, null).content().isEmpty());  // usable after it
      // An abort (here from the listener's thread) ends the call with ABORTED until reset().
      final TernException aborted = assertThrows(TernException.class,
          () -> s.complete(request, ChatListener.content(piece -> {
            s.abort();
            return true;
          })));
      assertEquals("ABORTED", aborted.statusName());
      assertEquals("ABORTED", assertThrows(TernException.class, () -> s.complete(request, null)).statusName());
      s.reset();
      assertFalse(s.complete(request, null).content().isEmpty());
    }
  }

  @Test
  void badRequestsThrowNamingWhatIsWrong() throws Exception {
    try (Session s = model.newSession(null)) {
      final TernException role = assertThrows(TernException.class,
          () -> s.complete(ChatRequest.builder().message(new ChatMessage("narrator", "hi")).build(), null));
      assertEquals("INVALID_ARGUMENT", role.statusName());
      assertTrue(role.getMessage().contains("narrator"), role.getMessage());
      final TernException name = assertThrows(TernException.class,
          () -> s.complete(ChatRequest.builder().user("hi").tool("get weather", null, null).build(), null));
      assertEquals("INVALID_ARGUMENT", name.statusName());
      assertTrue(name.getMessage().contains("function name"), name.getMessage());
      final TernException unknown = assertThrows(TernException.class,
          () -> s.complete(ChatRequest.builder().user("hi").tool("f", null, null)
                               .toolChoice(ToolChoice.function("get_news")).build(), null));
      assertTrue(unknown.getMessage().contains("get_news"), unknown.getMessage());
      final TernException schema = assertThrows(TernException.class,
          () -> s.complete(ChatRequest.builder().user("hi")
                               .responseFormat(ResponseFormat.jsonSchema("{\"type\":\"string\",\"pattern\":\"a+\"}"))
                               .build(), null));
      assertEquals("UNSUPPORTED_SCHEMA", schema.statusName());
      final TernException top = assertThrows(TernException.class,
          () -> s.complete(ChatRequest.builder().user("hi").logprobs(true).topLogprobs(21).build(), null));
      assertTrue(top.getMessage().contains("top_logprobs"), top.getMessage());
      final TernException nullRole = assertThrows(TernException.class,
          () -> s.complete(ChatRequest.builder().message(new ChatMessage(null, "hi")).build(), null));
      assertTrue(nullRole.getMessage().contains("role is null"), nullRole.getMessage());
      final TernException empty =
          assertThrows(TernException.class, () -> s.complete(ChatRequest.builder().build(), null));
      assertTrue(empty.getMessage().contains("a prompt"), empty.getMessage());
      final TernException grammar = assertThrows(TernException.class,
          () -> s.complete(ChatRequest.builder().user("hi").sampler(new SamplerParams().grammar("root ::= \"a\""))
                               .build(), null));
      assertTrue(grammar.getMessage().contains("responseFormat"), grammar.getMessage());
      final TernException lone = assertThrows(TernException.class,
          () -> s.complete(ChatRequest.builder().user("a\uD800b").build(), null));
      assertEquals("INVALID_UTF8", lone.statusName());
      assertThrows(TernException.class, () -> s.complete(ChatRequest.builder().user("hi").maxTokens(-1).build(), null));
    }
  }

  @Test
  void charactersOutsideTheBmpRoundTrip() throws Exception {
    final String emoji = "Emma \uD83D\uDE00 and \u6771\u4EAC";
    try (Session s = model.newSession(null)) {
      // In through a message and the grammar, out through the reply.
      final Events events = new Events();
      final ChatResult r = s.complete(ChatRequest.builder()
                                          .user("Say " + emoji)
                                          .responseFormat(ResponseFormat.grammar("root ::= \"" + emoji + "\""))
                                          .maxTokens(64)
                                          .build(),
                                      events);
      assertEquals(emoji, r.content());
      assertEquals(emoji, events.content.toString());
      assertEquals(ChatResult.FinishReason.STOP, r.finishReason());
      // In a tool's schema and out through a call's arguments.
      final ChatResult call = s.complete(
          ChatRequest.builder()
              .user("Greet")
              .tool("greet", "\uD83D\uDC4B", "{\"type\":\"object\",\"properties\":{\"text\":{\"const\":\"" + emoji
                                                   + "\"}},\"required\":[\"text\"],\"additionalProperties\":false}")
              .toolChoice(ToolChoice.REQUIRED)
              .maxTokens(64)
              .build(),
          null);
      assertEquals(ChatResult.FinishReason.TOOL_CALLS, call.finishReason());
      assertEquals(Map.of("text", emoji), object(call.toolCalls().get(0).arguments()));
    }
  }
}
