"""The Python binding against independent references: tern-run's and tern-plan's output for the
same requests, the header's error list, the ABI the build keeps (cmake/libtern.abi), and the
runtime's own messages for bad input."""
import ctypes
import gc
import json
import math
import os
import re
import subprocess
import sys
import threading
import time

import numpy
import pytest

import tern
from tern import _capi
from conftest import readme_example, required_file

PROMPT = "It is a truth universally acknowledged"
BUDGET = "64M"


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def tern_run_stdout(tern_run, bundle, *args):
    r = run([tern_run, bundle, "--memory-budget", BUDGET] + list(args))
    assert r.returncode == 0, r.stderr
    return r.stdout


def tern_run_failure(tern_run, *args):
    """What tern-run says when it fails: (stage, message, status name)."""
    r = run([tern_run] + list(args))
    assert r.returncode != 0
    m = re.search(r"^tern-run: (\w+): (.*) \((\w+)\)$", r.stderr, re.M)
    assert m, r.stderr
    return m.group(1), m.group(2), m.group(3)


@pytest.mark.parametrize("sampling", [["--temp", "0"], ["--temp", "0.7", "--seed", "42"]])
def test_generated_text_equals_tern_runs(bundle, tern_run, sampling):
    expected = tern_run_stdout(tern_run, bundle, "-p", PROMPT, "-n", "48", *sampling)
    sampler = {"temperature": float(sampling[1])}
    if "--seed" in sampling:
        sampler["seed"] = int(sampling[3])
    with tern.Model(bundle, memory_budget=BUDGET) as model:
        session = model.session()
        generation = session.generate(PROMPT, max_tokens=48, **sampler)
        pieces = list(generation)
    assert len(pieces) > 1, "the text did not stream in pieces"
    assert PROMPT + "".join(pieces) + "\n" == expected
    assert generation.stats["generated_tokens"] == 48 or generation.stats["stop_reason"] == "end_of_generation"


@pytest.mark.parametrize("cli, params", [
    (["--budget", "64M"], {"memory_budget": "64M"}),
    (["--context", "256"], {"n_ctx": 256}),
    (["--budget", "48M", "--context", "128", "--sessions", "2"], {"memory_budget": "48M", "n_ctx": 128, "n_sessions": 2}),
    (["--context", "200", "--kv", "q8", "--kv", "q4>2@96"], {"n_ctx": 200, "kv_modes": ["q8", "q4>2@96"]}),
])
def test_plan_rows_equal_tern_plan_json(bundle, tern_plan, cli, params):
    r = run([tern_plan, bundle, "--json"] + cli)
    assert r.returncode == 0, r.stderr
    expected = json.loads(r.stdout)["plans"][0]["rows"]
    rows = tern.plan(bundle, **params)
    assert [row["kv_mode"] for row in rows] == [e["kv_mode"] for e in expected]
    for row, e in zip(rows, expected):
        assert set(row) == set(e)
        for key, value in e.items():
            if key == "kv_bytes_per_token":
                assert row[key] == pytest.approx(value, abs=0.0005)  # tern-plan prints three decimals
            else:
                assert row[key] == value, (row["kv_mode"], key)


def test_bad_bundles_and_parameters_fail_with_the_runtimes_messages(bundle, tern_run, tmp_path):
    garbage = tmp_path / "garbage.tern"
    garbage.write_bytes(b"not a bundle at all " * 64)
    cases = [
        ([str(tmp_path / "missing.tern")], str(tmp_path / "missing.tern"), {}),
        ([str(garbage)], str(garbage), {}),
        ([bundle, "--memory-budget", "1M"], bundle, {"memory_budget": "1M"}),
        ([bundle, "--kv", "q5"], bundle, {"kv_mode": "q5"}),
        ([bundle, "--kv", "adaptive:1.25"], bundle, {"kv_mode": "adaptive:1.25"}),
    ]
    for cli, path, params in cases:
        stage, message, status = tern_run_failure(tern_run, *cli, "-p", "x", "-n", "1")
        assert stage == "load"
        with pytest.raises(tern.TernError) as e:
            tern.Model(path, **params)
        assert (e.value.status.name, e.value.message) == (status, message)
        assert str(e.value) == "%s (%s)" % (message, status)


def test_a_prompt_longer_than_the_context_fails_as_in_tern_run(bundle, tern_run):
    prompt = " ".join(["Emma"] * 200)
    stage, message, status = tern_run_failure(tern_run, bundle, "-c", "64", "--kv", "fp16", "-p", prompt, "-n", "4")
    assert (stage, status) == ("generate", "PROMPT_TOO_LONG")
    with tern.Model(bundle, n_ctx=64, kv_mode="fp16") as model, model.session() as session:
        with pytest.raises(tern.TernError) as e:
            session.generate(prompt, max_tokens=4).text()
        assert (e.value.status, e.value.message) == (tern.Status.PROMPT_TOO_LONG, message)


def test_bad_calls_are_tern_errors_naming_the_problem(bundle, chat_bundle):
    with tern.Model(chat_bundle, memory_budget=BUDGET) as model:
        with pytest.raises(tern.TernError) as e:
            model.apply_chat([{"role": "robot", "content": "hi"}])
        assert e.value.status == tern.Status.INVALID_ARGUMENT and "robot" in e.value.message
        with pytest.raises(tern.TernError) as e:
            model.apply_chat([{"role": "user", "content": "a lone surrogate \ud800"}])
        assert e.value.status == tern.Status.INVALID_UTF8 and e.value.message
        session = model.session()
        vocab = model.info["vocab_size"]
        with pytest.raises(tern.TernError) as e:
            session.set_logit_bias({vocab + 5: 1.0})
        assert e.value.status == tern.Status.INVALID_TOKEN and str(vocab + 5) in e.value.message
        with pytest.raises(tern.TernError) as e:
            session.logits()  # nothing run yet
        assert e.value.status == tern.Status.INVALID_STATE and "logits" in e.value.message
        # Values the C types cannot hold are refused, not wrapped; unknown names are Python's TypeError.
        with pytest.raises(tern.TernError) as e:
            tern.Model(bundle, n_ctx=-1)
        assert e.value.status == tern.Status.INVALID_ARGUMENT and "n_ctx" in e.value.message
        with pytest.raises(TypeError):
            tern.Model(bundle, context=128)
        with pytest.raises(TypeError):
            model.session(temprature=0.5)
        session.close()
        with pytest.raises(tern.TernError) as e:
            session.generate("x")
        assert e.value.status == tern.Status.INVALID_STATE
        session.close()  # twice is fine
    with pytest.raises(tern.TernError) as e:
        model.info
    assert e.value.status == tern.Status.INVALID_STATE
    with pytest.raises(tern.TernError) as e:
        tern.parse_byte_size("12 parsecs")
    assert e.value.status == tern.Status.INVALID_ARGUMENT and e.value.message


def test_damaged_and_foreign_states_are_refused(bundle):
    with tern.Model(bundle, memory_budget=BUDGET) as model, model.session(temperature=0) as session:
        session.generate(PROMPT, max_tokens=8).text()
        state = session.save_state()
        damaged = state[:-1] + bytes([state[-1] ^ 0xFF])
        for data, status, pattern in [
            (b"garbage", tern.Status.TRUNCATED, r"shorter than its header"),
            (state[:-1], tern.Status.TRUNCATED, r"payload bytes"),
            (damaged, tern.Status.CORRUPT_FILE, r"checksum"),
            (b"X" * 8 + state[8:], tern.Status.BAD_MAGIC, r"magic"),
        ]:
            with pytest.raises(tern.TernError) as e:
                session.load_state(data)
            assert e.value.status == status and re.search(pattern, e.value.message), e.value
    with tern.Model(bundle, memory_budget=BUDGET, kv_mode="q8") as other, other.session() as session:
        with pytest.raises(tern.TernError) as e:
            session.load_state(state)
        assert e.value.status == tern.Status.INVALID_ARGUMENT and "q8" in e.value.message


def test_two_sessions_on_two_threads_generate_what_they_generate_alone(bundle):
    prompts = [PROMPT, "Emma Woodhouse, handsome, clever, and rich"]
    with tern.Model(bundle, memory_budget="128M", n_sessions=2, n_threads=1) as model:
        alone = []
        for prompt in prompts:
            with model.session(temperature=0.8, seed=11) as session:
                alone.append(session.generate(prompt, max_tokens=64).text())
        sessions = [model.session(temperature=0.8, seed=11) for _ in prompts]
        results, spans = [None, None], [None, None]
        barrier = threading.Barrier(2)

        def work(i):
            barrier.wait()
            start = time.monotonic()
            results[i] = sessions[i].generate(prompts[i], max_tokens=64).text()
            spans[i] = (start, time.monotonic())

        threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert results == alone
    assert max(s[0] for s in spans) < min(s[1] for s in spans), "the two generations did not overlap: %s" % spans


def test_a_restored_state_continues_exactly(bundle, tmp_path):
    with tern.Model(bundle, memory_budget=BUDGET) as model:
        with model.session(temperature=0.9, seed=5) as session:
            session.generate(PROMPT, max_tokens=16).text()
            state = session.save_state()
            session.save_state_file(str(tmp_path / "state"))
            position = session.position
            unsaved = session.generate(" Then", max_tokens=24).text()
        assert unsaved
        # A fresh session with another sampler: the state brings the saved sampler and its random state.
        with model.session(temperature=0.1, seed=99) as session:
            session.load_state(state)
            assert session.position == position
            assert session.generate(" Then", max_tokens=24).text() == unsaved
            session.reset()
            session.load_state_file(str(tmp_path / "state"))
            assert session.generate(" Then", max_tokens=24).text() == unsaved


def test_abort_from_another_thread_ends_a_generation_that_would_not_end(bundle):
    with tern.Model(bundle, memory_budget=BUDGET, kv_mode="q8") as model, model.session(temperature=0) as session:
        info = model.info
        session.set_logit_bias({t: -math.inf for t in (info["eos_id"], info["eot_id"]) if t >= 0})
        generation = session.generate(PROMPT, max_tokens=2**32 - 1)  # eviction on: no context limit either
        pieces = 0
        with pytest.raises(tern.TernError) as e:
            for _ in generation:
                pieces += 1
                if pieces == 4:
                    with pytest.raises(tern.TernError) as busy:
                        session.reset()  # only abort() may touch a session while it generates
                    assert busy.value.status == tern.Status.INVALID_STATE
                if pieces == 8:
                    threading.Thread(target=session.abort).start()
        assert e.value.status == tern.Status.ABORTED and e.value.message
        assert generation.stats["generated_tokens"] >= 8
        session.reset()  # clears the request
        assert session.generate(PROMPT, max_tokens=4).text()


def test_breaking_out_of_a_generation_stops_it_and_frees_the_session(bundle):
    with tern.Model(bundle, memory_budget=BUDGET) as model, model.session(temperature=0) as session:
        for _ in session.generate(PROMPT, max_tokens=200):
            break
        gc.collect()
        position = session.position
        assert position < len(model.tokenize(PROMPT)) + 200
        assert session.generate(" and", max_tokens=4).text()


def test_logits_are_numpy_and_greedy_sampling_takes_their_argmax(bundle):
    with tern.Model(bundle, memory_budget=BUDGET) as model, model.session(temperature=0) as session:
        tokens = model.tokenize(PROMPT)
        assert model.detokenize(tokens) == PROMPT
        session.prefill(tokens)
        assert session.position == len(tokens) and session.history() == tokens
        logits = session.logits()
        assert isinstance(logits, numpy.ndarray) and logits.dtype == numpy.float32
        assert logits.shape == (model.info["vocab_size"],)
        token = session.sample()
        assert token == int(numpy.argmax(logits))
        session.decode(token)
        assert session.position == len(tokens) + 1
        # A logit hook sees the logits and the history and can change them.
        banned = int(numpy.argmax(session.logits()))
        seen = []

        def hook(values, history):
            seen.append(len(history))
            values[banned] = -numpy.inf
        session.set_logit_hook(hook)
        assert session.sample() != banned and seen == [len(tokens) + 1]
        session.set_logit_hook(None)


def test_chat_replies_equal_tern_run_chat(chat_bundle, tern_run):
    turns = ["Who is Emma?", "And Mr. Knightley?"]
    r = run([tern_run, chat_bundle, "--chat", "-n", "24", "--temp", "0", "--memory-budget", BUDGET],
            input="\n".join(turns) + "\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("> ") and r.stdout.endswith("\n> ")
    expected = r.stdout[2:-3].split("\n> ")
    assert len(expected) == 2 and all(expected), r.stdout
    messages, replies = [], []
    with tern.Model(chat_bundle, memory_budget=BUDGET) as model, model.session(temperature=0) as session:
        for turn in turns:
            messages.append({"role": "user", "content": turn})
            reply = session.chat(messages, max_tokens=24).text()
            replies.append(reply)
            messages.append({"role": "assistant", "content": reply})
    assert replies == expected


def test_log_lines_reach_a_python_callback(bundle):
    lines = []
    tern.set_log_callback(lambda level, message: lines.append((level, message)))
    try:
        with tern.Model(bundle, memory_budget=BUDGET, n_threads=4096) as model:
            n_threads = model.info["n_threads"]
    finally:
        tern.set_log_callback(None)
    assert n_threads < 4096
    assert (tern.LOG_LEVELS["warning"], "4096 threads requested, %d cores available: using %d" %
            (n_threads, n_threads)) in lines, lines


def test_a_thousand_create_close_cycles_do_not_grow_rss(bundle):
    def rss_kib():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])

    def cycle():
        with tern.Model(bundle, memory_budget=BUDGET) as model, model.session() as session:
            session.generate("It", max_tokens=1).text()

    for _ in range(20):
        cycle()
    gc.collect()
    before = rss_kib()
    start = time.monotonic()
    for _ in range(1000):
        cycle()
    gc.collect()
    after = rss_kib()
    print("\nRSS before %d KiB, after 1000 create/generate/close cycles %d KiB (%+d KiB, %.1f s)" %
          (before, after, after - before, time.monotonic() - start))
    # Each cycle maps the bundle and takes a ~4 MB arena: a leak of either would be gigabytes.
    assert after - before < 16 * 1024


def abi_file():
    """cmake/libtern.abi: the SONAME, the symbols, each struct's size, alignment and fields."""
    soname, symbols, structs, current = None, set(), {}, None
    for line in open(required_file("TERN_ABI_FILE")):
        if line.startswith("soname "):
            soname = line.split()[1]
        elif line.startswith("symbol "):
            symbols.add(line.split()[1])
        elif line.startswith("struct "):
            _, current, _, size, _, align = line.split()
            structs[current] = (int(size), int(align), [])
        elif line.startswith("  ") and current:
            offset, rest = line.strip().split(" ", 1)
            ctype, name = rest.rsplit(" ", 1)
            structs[current][2].append((int(offset), ctype, name))
    return soname, symbols, structs


# The C types the header's structs use, as ctypes declares them.
C_TYPES = {
    "uint64_t": ctypes.c_uint64, "uint32_t": ctypes.c_uint32, "int32_t": ctypes.c_int32, "int": ctypes.c_int,
    "float": ctypes.c_float, "double": ctypes.c_double, "size_t": ctypes.c_size_t, "void *": ctypes.c_void_p,
    "const char *": ctypes.c_char_p, "char[32]": ctypes.c_char * 32, "char[8]": ctypes.c_char * 8, "tern_kv_type": ctypes.c_int,
    "tern_status": ctypes.c_int, "tern_stop_reason": ctypes.c_int, "tern_embed_format": ctypes.c_int,
    "tern_pooling": ctypes.c_int, "tern_model *": ctypes.POINTER(_capi.ModelHandle),
    "tern_session *": ctypes.POINTER(_capi.SessionHandle),
    "const char *const *": ctypes.POINTER(ctypes.c_char_p), "struct tern_sampler_params": _capi.SamplerParams,
    "tern_tool_choice": ctypes.c_int, "tern_response_format": ctypes.c_int, "tern_chat_event_type": ctypes.c_int,
    "tern_finish_reason": ctypes.c_int, "const tern_tool_call *": ctypes.POINTER(_capi.ToolCall),
    "const tern_chat_turn *": ctypes.POINTER(_capi.ChatTurn), "const tern_chat_tool *": ctypes.POINTER(_capi.ChatTool),
    "const tern_logit_bias *": ctypes.POINTER(_capi.LogitBias), "const int32_t *": ctypes.POINTER(ctypes.c_int32),
    "const tern_token_logprob *": ctypes.POINTER(_capi.TokenLogprob),
}


def test_the_ctypes_declarations_are_the_kept_abi():
    soname, symbols, structs = abi_file()
    assert _capi.SONAME == soname
    assert set(_capi.FUNCTIONS) == symbols, "functions without a line in tern/_capi.py FUNCTIONS: %s; lines for " \
        "functions the ABI lacks: %s" % (sorted(symbols - set(_capi.FUNCTIONS)), sorted(set(_capi.FUNCTIONS) - symbols))
    assert set(_capi.STRUCTS) == set(structs)
    for name, cls in _capi.STRUCTS.items():
        size, align, fields = structs[name]
        assert (ctypes.sizeof(cls), ctypes.alignment(cls)) == (size, align), name
        declared = [(getattr(cls, f).offset, f) for f, _ in cls._fields_]
        assert declared == [(offset, f) for offset, _, f in fields], name
        for (f, ctype), (_, c_type, _) in zip(cls._fields_, fields):
            assert c_type in C_TYPES, "%s.%s: C type %r has no ctypes mapping in this test" % (name, f, c_type)
            assert ctype == C_TYPES[c_type] or (ctypes.sizeof(ctype) == ctypes.sizeof(C_TYPES[c_type]) and
                                                ctype._type_ == C_TYPES[c_type]._type_), (name, f, c_type, ctype)


def test_status_names_and_values_are_the_error_list():
    text = open(required_file("TERN_ERROR_CODES")).read()
    listed = {name: int(value, 16) for name, value in re.findall(r"X\(\w+, (\w+), (0x[0-9A-Fa-f]+),", text)}
    assert len(listed) > 20
    assert {s.name: s.value for s in tern.Status} == listed


def test_versions_agree():
    assert tern.__version__ == tern.version() == os.environ["TERN_PROJECT_VERSION"]
    assert os.path.realpath(tern.library_path()) == os.path.realpath(required_file("TERN_LIBRARY"))


def test_the_readme_example_runs_and_prints_tern_runs_text(bundle, tern_run, tmp_path):
    example = readme_example()
    assert len(example.strip().splitlines()) <= 12
    os.symlink(bundle, tmp_path / "tiny-austen.tern")
    r = run([sys.executable, "-c", example], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    first = r.stdout.splitlines()[0]
    m = re.search(r'generate\("([^"]+)", max_tokens=(\d+)\)', example)
    temperature = re.search(r"temperature=([0-9.]+)", example).group(1)
    seed = re.search(r"seed=(\d+)", example).group(1)
    expected = tern_run_stdout(tern_run, bundle, "-p", m.group(1), "-n", m.group(2), "--temp", temperature,
                               "--seed", seed)
    assert m.group(1) + first + "\n" == expected.split("\n")[0] + "\n"
    assert r.stdout.splitlines()[-1] == "OK"


def embedding_reference(model):
    """The float64 reference's vectors (tests/fixtures/embedding/reference.py, written independently of
    the runtime) for the texts embedded without a prompt."""
    root = required_file("TERN_EMBEDDING_TEST_DIR")
    cases = [json.loads(line) for line in open(os.path.join(root, "reference.jsonl"), encoding="utf-8")]
    cases = [c for c in cases if c["model"] == model and not c["prompt"]]
    assert len(cases) >= 15
    return os.path.join(root, model + ".tern"), [c["text"] for c in cases], numpy.array([c["embedding"] for c in cases])


def cosines(a, b):
    a, b = numpy.asarray(a, dtype=numpy.float64), numpy.asarray(b, dtype=numpy.float64)
    return (a * b).sum(1) / numpy.linalg.norm(a, axis=1) / numpy.linalg.norm(b, axis=1)


@pytest.mark.parametrize("model", ["qwen3", "gemma3"])
def test_embeddings_equal_the_reference_in_every_format(model):
    path, texts, ref = embedding_reference(model)
    with tern.Model(path) as m:
        info = m.embedding_info
        assert info["dimensions"] == ref.shape[1] and info["normalized"]
        vectors = m.embed(texts, prompt="")
        assert vectors.dtype == numpy.float32 and vectors.shape == ref.shape
        assert cosines(vectors, ref).min() >= 0.999
        # One text at a time gives what the batch gave.
        assert cosines(m.embed(texts[3], prompt=""), vectors[3:4]).min() >= 0.99999
        cut = ref[:, :32] / numpy.linalg.norm(ref[:, :32], axis=1, keepdims=True)
        short = m.embed(texts, prompt="", dimensions=32)
        assert short.shape == (len(texts), 32) and cosines(short, cut).min() >= 0.999
        q, scales = m.embed(texts, prompt="", dimensions=32, format="int8")
        assert q.dtype == numpy.int8 and cosines(q.astype(numpy.float64) * scales[:, None], cut).min() >= 0.995
        bits = numpy.unpackbits(m.embed(texts, prompt="", format="binary"), axis=1)[:, :ref.shape[1]]
        sure = numpy.abs(ref) > 0.02
        assert (bits[sure] == (ref[sure] > 0)).all()


def test_embedding_errors_are_tern_errors(bundle):
    path, texts, _ = embedding_reference("qwen3")
    with tern.Model(path) as m:
        with pytest.raises(tern.TernError) as e:
            m.embed(texts[:2], prompt="no-such-prompt")
        assert "no-such-prompt" in str(e.value)
        with pytest.raises(tern.TernError) as e:
            m.embed("x", format="float16")
        assert e.value.status == tern.Status.INVALID_ARGUMENT
        with m.session() as s, pytest.raises(tern.TernError) as e:
            s.generate("It", max_tokens=1).text()
        assert e.value.status == tern.Status.NOT_SUPPORTED
    with tern.Model(bundle, memory_budget=BUDGET) as generative, pytest.raises(tern.TernError) as e:
        generative.embed("It is a truth")
    assert e.value.status == tern.Status.NOT_SUPPORTED


def test_a_json_schema_holds_sampled_replies_and_bad_grammars_are_tern_errors(bundle):
    roles = ["heroine", "suitor", "relative"]
    schema = {"type": "object", "properties": {"role": {"enum": roles}, "age": {"type": "integer", "minimum": 0,
              "maximum": 120}}, "required": ["role", "age"], "additionalProperties": False}
    grammar = tern.json_schema_to_grammar(schema)
    assert "root" in grammar
    with tern.Model(bundle, memory_budget=BUDGET, grammar_bytes=4 << 20) as model:
        for seed in (1, 2, 3):
            with model.session(grammar=grammar, temperature=1.0, seed=seed) as s:
                reply = json.loads(s.generate(PROMPT, max_tokens=64).text())
                assert list(reply) == ["role", "age"] and reply["role"] in roles and 0 <= reply["age"] <= 120
        with model.session(temperature=0) as s:
            s.set_grammar('root ::= "yes" | "no"')
            assert s.generate(PROMPT, max_tokens=8).text() in ("yes", "no")
            s.set_grammar(None)
            with pytest.raises(tern.TernError) as e:
                s.set_grammar('root ::= "unterminated')
            assert e.value.status == tern.Status.INVALID_GRAMMAR
    with pytest.raises(tern.TernError) as e:
        tern.json_schema_to_grammar({"type": "string", "pattern": "^a+$"})
    assert e.value.status == tern.Status.UNSUPPORTED_SCHEMA and "pattern" in str(e.value)
    with tern.Model(bundle, memory_budget=BUDGET) as model, model.session(temperature=0) as s:
        s.set_grammar('root ::= "x"')  # the default grammar memory holds it
        assert s.generate(PROMPT, max_tokens=8).text() == "x"
    with tern.Model(bundle, memory_budget=BUDGET, grammar_bytes=0) as model, model.session() as s, \
            pytest.raises(tern.TernError) as e:
        s.set_grammar('root ::= "x"')
    assert e.value.status == tern.Status.INVALID_STATE


@pytest.mark.parametrize("kv", ["f32", "q4"])
def test_an_explicit_context_is_a_contract(bundle, tern_run, kv):
    """n_ctx (and tern-run --ctx) that the budget cannot hold is BUDGET_TOO_SMALL with the numbers,
    never a smaller context (a byte short of the plan gave 255 positions, the plan's minimum
    16); without n_ctx the context is the planner's, as large as fits."""
    row = tern.plan(bundle, [kv], n_ctx=256)[0]
    assert row["status"] == "OK"
    needed, wanted = row["total_bytes"], row["context_tokens"]
    with tern.Model(bundle, memory_budget=needed, n_ctx=256, kv_mode=kv) as model:
        assert model.info["context_tokens"] == wanted
    for budget in (needed - 1, row["minimum_budget_bytes"]):
        with pytest.raises(tern.TernError) as e:
            tern.Model(bundle, memory_budget=budget, n_ctx=256, kv_mode=kv)
        assert e.value.status == tern.Status.BUDGET_TOO_SMALL
        assert str(needed) in e.value.message and str(budget) in e.value.message, e.value.message
        stage, message, status = tern_run_failure(tern_run, bundle, "--ctx", "256", "--kv", kv, "--memory-budget",
                                                  str(budget), "-p", "Hi", "-n", "1")
        assert status == "BUDGET_TOO_SMALL" and str(needed) in message, message
    with tern.Model(bundle, memory_budget=needed - 1, kv_mode=kv) as model:  # automatic: what fits
        assert 16 <= model.info["context_tokens"] < wanted or wanted == model.info["max_context"]


@pytest.mark.parametrize("text", ["0.5", "0.9", "1e-9", "-0", "0x0", "+1G", " 1G", "1.5", "0.3K", "inf", "nan",
                                  "available-1e1%", "available- 5%", "available-0x5%", "available-+5%"])
def test_a_budget_is_whole_bytes(bundle, text):
    """Fractions of a byte, signs, hex and exponents are refused (they used to parse as 0 bytes:
    no limit at all); whole byte counts with units and available[-N%] still parse."""
    with pytest.raises(tern.TernError) as e:
        tern.parse_memory_budget(text)
    assert e.value.status == tern.Status.INVALID_ARGUMENT, text
    with pytest.raises(tern.TernError):
        tern.Model(bundle, memory_budget=text)
    with pytest.raises(TypeError):
        tern.Model(bundle, memory_budget=0.5)


def test_whole_budgets_still_parse():
    assert tern.parse_memory_budget("4096") == 4096
    assert tern.parse_memory_budget("512K") == 512 << 10
    assert tern.parse_memory_budget("1.5G") == 3 << 29
    assert tern.parse_memory_budget("64MiB") == 64 << 20
    assert tern.parse_memory_budget("2T") == 2 << 40
    assert 0 < tern.parse_memory_budget("available-12.5%") <= tern.available_memory()


def test_a_budget_above_physical_memory_is_a_visible_warning(bundle):
    """It loads (the plan itself is small) but the caller can see it: the log and the model."""
    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    logged = []
    tern.set_log_callback(lambda level, message: logged.append(message))
    try:
        with tern.Model(bundle, memory_budget=physical + (1 << 30)) as model:
            assert model.budget_above_physical() == (True, physical)
        with tern.Model(bundle, memory_budget=BUDGET) as model:
            assert model.budget_above_physical() == (False, physical)
    finally:
        tern.set_log_callback(None)
    assert any("physical memory" in m and str(physical) in m for m in logged), logged


def test_model_plan_is_what_the_defaults_planned(bundle):
    """No memory_budget, no n_ctx: the model's context up to 4096 tokens, an fp16 cache, and
    the plan tern.plan() gives for the same parameters."""
    with tern.Model(bundle) as model:
        plan = model.plan
        assert plan["budget_bytes"] == 0 and plan["kv_mode"] == "f16"
        assert plan["context_tokens"] == min(model.info["max_context"], 4096) == model.info["context_tokens"]
        assert plan["planned_total_bytes"] == tern.plan(bundle, ["fp16"])[0]["total_bytes"]
    with tern.Model(bundle, memory_budget=BUDGET, n_ctx=128) as model:
        assert model.plan["context_tokens"] == 128 and model.plan["budget_bytes"] == 64 << 20


def test_weights_pages_is_a_load_parameter(bundle):
    """weights_pages reaches tern_model_load: "copy" holds the bundle in anonymous memory, "map"
    in its mapping, a name the library does not know is refused naming the choices."""
    size = os.path.getsize(bundle)
    with tern.Model(bundle, n_ctx=64, weights_pages="map") as model:
        pages = model.weights_pages()
        assert (pages["mode"], pages["load"], pages["anonymous"], pages["bytes"]) == ("map", "not tried", 0, size)
    with pytest.raises(tern.TernError) as refused:
        tern.Model(bundle, n_ctx=64, weights_pages="huge")
    assert refused.value.status == tern.Status.INVALID_ARGUMENT and "auto, map or copy" in str(refused.value)
    try:
        model = tern.Model(bundle, n_ctx=64, weights_pages="copy")
    except tern.TernError as e:
        if e.status == tern.Status.NOT_SUPPORTED:
            pytest.skip("copy: %s" % e.message)  # no transparent huge pages here
        raise
    with model:
        pages = model.weights_pages()
        assert (pages["mode"], pages["load"], pages["anonymous"], pages["bytes"]) == ("copy", "copied", 1, size)
        assert model.memory_report()["weights_bytes"] == size
