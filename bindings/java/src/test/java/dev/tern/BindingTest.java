package dev.tern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * The Java binding on a real JVM with a real bundle (tiny-austen, system property
 * tern.bundle), against tern-run (tern.run) for the text.
 */
class BindingTest {
  static final String BUNDLE = System.getProperty("tern.bundle", "");
  static final String PROMPT = "It is a truth universally acknowledged";

  static String bundle() {
    assertTrue(Files.exists(Path.of(BUNDLE)), "bundle not converted (ctest's runtime_make_bundles does): " + BUNDLE);
    return BUNDLE;
  }

  static ModelParams params() {
    return new ModelParams().memoryBudget(64L << 20).threads(1);
  }

  static SamplerParams greedy() {
    return new SamplerParams().temperature(0.0f);
  }

  @Test
  void greedyTextEqualsTernRun() throws Exception {
    final String run = System.getProperty("tern.run", "");
    assertTrue(Files.exists(Path.of(run)), "tern-run not built: " + run);
    final Process p = new ProcessBuilder(run, bundle(), "-p", PROMPT, "-n", "48", "--temp", "0", "--memory-budget",
                                         "64M", "-t", "1").redirectError(ProcessBuilder.Redirect.DISCARD).start();
    final ByteArrayOutputStream out = new ByteArrayOutputStream();
    try (InputStream in = p.getInputStream()) {
      in.transferTo(out);
    }
    assertEquals(0, p.waitFor());
    try (Model model = Model.load(bundle(), params()); Session s = model.newSession(greedy())) {
      final String text = s.generate(PROMPT, 48);
      assertEquals(out.toString(StandardCharsets.UTF_8), PROMPT + text + "\n");
      assertTrue(text.length() > 20, text);
    }
  }

  @Test
  void streamsPiecesThatJoinToTheText() throws Exception {
    try (Model model = Model.load(bundle(), params()); Session s = model.newSession(greedy())) {
      final List<String> pieces = new ArrayList<>();
      final String text = s.generate(PROMPT, 32, true, piece -> pieces.add(piece));
      assertTrue(pieces.size() > 5, "pieces: " + pieces.size());
      assertEquals(text, String.join("", pieces));
      // The listener can stop it.
      s.reset();
      final List<String> few = new ArrayList<>();
      s.generate(PROMPT, 32, true, piece -> few.add(piece) && few.size() < 3);
      assertEquals(3, few.size());
    }
  }

  @Test
  void abortFromAnotherThreadStopsGeneration() throws Exception {
    try (Model model = Model.load(bundle(), params().kvMode("q4")); Session s = model.newSession(greedy())) {
      final CountDownLatch started = new CountDownLatch(5);
      final AtomicReference<Throwable> thrown = new AtomicReference<>();
      final Thread t = new Thread(() -> {
        try {
          s.generate(PROMPT, 1 << 30, true, piece -> {
            started.countDown();
            return true;
          });
        } catch (Throwable e) {
          thrown.set(e);
        }
      });
      t.start();
      started.await();
      s.abort();
      t.join(60_000);
      assertFalse(t.isAlive());
      assertTrue(thrown.get() instanceof TernException, String.valueOf(thrown.get()));
      assertEquals("ABORTED", ((TernException) thrown.get()).statusName());
    }
  }

  @Test
  void savedStateContinuesExactly() throws Exception {
    try (Model model = Model.load(bundle(), params().sessions(2))) {
      final Session a = model.newSession(new SamplerParams().temperature(0.8f).seed(7));
      a.generate(PROMPT, 20);
      final byte[] state = a.saveState();
      final String want = a.generate("", 20, false, null);
      final Session b = model.newSession(greedy());
      b.loadState(state);
      assertEquals(want, b.generate("", 20, false, null));
      // Through a file.
      final Path file = Files.createTempFile("tern", ".state");
      try {
        b.saveState(file.toString());
        final String more = b.generate("", 10, false, null);
        a.loadState(file.toString());
        assertEquals(more, a.generate("", 10, false, null));
      } finally {
        Files.deleteIfExists(file);
      }
      final byte[] damaged = state.clone();
      damaged[damaged.length / 2] ^= 1;
      final TernException e = assertThrows(TernException.class, () -> a.loadState(damaged));
      assertEquals("CORRUPT_FILE", e.statusName());
    }
  }

  @Test
  void badInputIsAnExceptionWithTheMessage() throws Exception {
    final TernException missing = assertThrows(TernException.class, () -> Model.load("/nonexistent/x.tern", params()));
    assertEquals("FILE_NOT_FOUND", missing.statusName());
    assertTrue(missing.getMessage().contains("/nonexistent/x.tern"), missing.getMessage());
    final TernException budget = assertThrows(TernException.class,
                                              () -> Model.load(bundle(), params().memoryBudget(1 << 20)));
    assertEquals("BUDGET_TOO_SMALL", budget.statusName());
    assertTrue(budget.getMessage().contains("at least"), budget.getMessage());
    assertThrows(TernException.class, () -> Model.load(bundle(), params().kvMode("q5")));
    try (Model model = Model.load(bundle(), params())) {
      final TernException role = assertThrows(TernException.class,
                                              () -> model.applyChat(List.of(new ChatMessage("robot", "hi")), true));
      assertEquals("INVALID_ARGUMENT", role.statusName());
      // A lone surrogate is not valid UTF-8.
      final TernException utf8 = assertThrows(TernException.class,
                                              () -> model.applyChat(List.of(ChatMessage.user("a\uD800b")), true));
      assertEquals("INVALID_UTF8", utf8.statusName());
      // Characters outside the BMP survive the trip.
      final String emoji = "Emma \uD83D\uDE00 and \u6771\u4EAC";
      assertEquals(emoji, model.detokenize(model.tokenize(emoji, false, false)));
      final Session s = model.newSession(greedy());
      assertThrows(TernException.class, () -> model.newSession(greedy()));  // one slot
      assertThrows(TernException.class, () -> s.truncate(5));
      assertEquals("INVALID_TOKEN", assertThrows(TernException.class,
                                                 () -> s.setLogitBias(new int[] {-3}, new float[] {1f})).statusName());
    }
  }

  @Test
  void grammarsAndSchemasConstrainTheOutput() throws Exception {
    final ModelParams mp = params().grammarMemory(2L << 20);
    try (Model model = Model.load(bundle(), mp)) {
      for (long seed = 1; seed <= 4; ++seed) {
        try (Session s = model.newSession(new SamplerParams().temperature(1.0f).seed(seed)
                                              .jsonSchema("{\"enum\": [\"Emma\", \"Persuasion\", 1811]}"))) {
          final String text = s.generate("Her best novel:", 24).strip();
          assertTrue(List.of("\"Emma\"", "\"Persuasion\"", "1811").contains(text), text);
        }
      }
      try (Session s = model.newSession(greedy())) {
        s.setSampler(new SamplerParams().temperature(1.0f).grammar("root ::= [a-z]{3} \"!\""));
        final String text = s.generate(PROMPT, 16);
        assertTrue(text.matches("[a-z]{3}!"), text);
        s.setSampler(greedy());  // no grammar: unconstrained again
        assertTrue(s.generate(" and", 8).length() > 0);
      }
      final TernException bad = assertThrows(TernException.class,
          () -> model.newSession(new SamplerParams().grammar("root ::= (\"a\"")));
      assertEquals("INVALID_GRAMMAR", bad.statusName());
      final TernException schema = assertThrows(TernException.class,
          () -> Tern.jsonSchemaToGrammar("{\"type\": \"string\", \"pattern\": \"a+\"}"));
      assertEquals("UNSUPPORTED_SCHEMA", schema.statusName());
      assertTrue(schema.getMessage().contains("'pattern'"), schema.getMessage());
      assertTrue(Tern.jsonSchemaToGrammar("{\"type\": \"boolean\"}").startsWith("root ::= boolean"));
    }
    try (Model model = Model.load(bundle(), params().grammarMemory(0))) {  // no grammar memory
      final TernException none = assertThrows(TernException.class,
          () -> model.newSession(new SamplerParams().grammar("root ::= \"a\"")));
      assertEquals("INVALID_STATE", none.statusName());
    }
  }

  @Test
  void closingTwiceIsSafeAndCallsAfterCloseFail() throws Exception {
    final Model model = Model.load(bundle(), params());
    final Session s = model.newSession(greedy());
    s.close();
    s.close();
    assertEquals("INVALID_STATE", assertThrows(TernException.class, () -> s.generate(PROMPT, 4)).statusName());
    final Session t = model.newSession(greedy());  // the slot is free again
    model.close();
    model.close();
    assertEquals("INVALID_STATE", assertThrows(TernException.class, () -> t.generate(PROMPT, 4)).statusName());
    assertEquals("INVALID_STATE", assertThrows(TernException.class, () -> model.newSession(greedy())).statusName());
    t.abort();  // harmless after close
  }

  static long residentKiB() throws Exception {
    for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
      if (line.startsWith("VmRSS:")) return Long.parseLong(line.replaceAll("[^0-9]", ""));
    }
    return -1;
  }

  @Test
  void thousandCreateCloseCyclesDoNotLeak() throws Exception {
    Assumptions.assumeTrue(Files.exists(Path.of("/proc/self/status")), "no /proc here");
    bundle();
    for (int i = 0; i < 50; ++i) cycle();  // warm up the JIT and the allocator
    System.gc();
    final long before = residentKiB();
    for (int i = 0; i < 1000; ++i) cycle();
    System.gc();
    final long after = residentKiB();
    // Each cycle maps the bundle and takes a ~4 MB arena: a leak of either would be gigabytes.
    assertTrue(after - before < 32 * 1024, "RSS grew from " + before + " KiB to " + after + " KiB");
    System.out.println("RSS before " + before + " KiB, after 1000 create/close cycles " + after + " KiB");
  }

  static void cycle() throws TernException {
    try (Model model = Model.load(BUNDLE, params()); Session s = model.newSession(greedy())) {
      s.generate("Hi", 1);
    }
  }

  @Test
  void readmeExampleRuns() throws Exception {
    final String reply = ReadmeExample.run(bundle());
    assertFalse(reply.isEmpty());
    assertFalse(ReadmeExample.weather(bundle()).isEmpty());
    try (Model model = Model.load(bundle(), params())) {
      assertEquals("plain", model.chatFormat());
    }
    final Plan[] plans = Model.plan(bundle(), params().contextTokens(256), "fp16", "q4");
    assertEquals(2, plans.length);
    assertTrue(plans[1].ok());
    assertTrue(plans[1].kvBytesPerToken() < plans[0].kvBytesPerToken());
    assertTrue(Tern.availableMemory() > 0);
    assertNotEquals("", Tern.version());
  }
}
