"""tern.Llama used the way llama-cpp-python's README uses its Llama, against independent
expectations: tool calls and JSON replies validated by jsonschema against their schemas,
streams against the whole reply, vectors against Model.embed, log-probabilities against a
float64 log-softmax of the logits a stateful Session exposes, completions against tern-run,
and the slot pool against sessions that run alone."""
import base64
import json
import re
import struct
import subprocess
import threading

import jsonschema
import numpy
import pytest

import tern
from tern import Llama
from conftest import converted, required_file

PROMPT = "It is a truth universally acknowledged"

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                                    "unit": {"enum": ["celsius", "fahrenheit"]}},
                   "required": ["city", "unit"], "additionalProperties": False}}}
CLOCK = {"type": "function", "function": {
    "name": "get_time", "description": "The time in a time zone",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 8}},
                   "required": ["zone"], "additionalProperties": False}}}
PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}
QUESTION = [{"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "What is the weather like in Paris today?"}]


@pytest.fixture(scope="module")
def llama3_bundle(bundle_dir):
    """The test bundle with LLaMA 3's chat format (header tokens, the "ipython" tool turn)."""
    return converted(bundle_dir, "tiny-llama3.tern")


@pytest.fixture(scope="module")
def austen_bundle(bundle_dir):
    return converted(bundle_dir, "tiny-austen-packed.tern")


@pytest.fixture(scope="module")
def embedding_bundle():
    return converted(required_file("TERN_EMBEDDING_TEST_DIR"), "qwen3.tern")


@pytest.fixture(scope="module")
def llm(llama3_bundle):
    # As llama-cpp-python's README: no load parameters (grammars need none).
    with Llama(model_path=llama3_bundle) as llm:
        assert llm.model.info["chat_format"] == "llama3"
        yield llm


def content(reply):
    return reply["choices"][0]["message"]["content"]


def validate_call(call, tools):
    assert call["type"] == "function" and call["id"].startswith("call_")
    tool = {t["function"]["name"]: t["function"] for t in tools}[call["function"]["name"]]
    arguments = json.loads(call["function"]["arguments"])
    jsonschema.validate(arguments, tool["parameters"])
    return arguments


def test_chat_with_tools_and_a_tool_result_turn(llm):
    tools = [WEATHER, CLOCK]
    reply = llm.create_chat_completion(messages=QUESTION, tools=tools, tool_choice="required", seed=7, max_tokens=256)
    assert reply["object"] == "chat.completion" and reply["id"].startswith("chatcmpl-")
    assert reply["model"] == llm.model_path and isinstance(reply["created"], int)
    (choice,) = reply["choices"]
    assert choice["index"] == 0 and choice["finish_reason"] == "tool_calls" and choice["logprobs"] is None
    message = choice["message"]
    assert message["role"] == "assistant" and message["content"] is None
    (call,) = message["tool_calls"]
    validate_call(call, tools)
    usage = reply["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] and usage["completion_tokens"] > 0

    # The reply goes back as it came, then the tool's result.
    result = json.dumps({"temperature": 21, "unit": "celsius"})
    turns = QUESTION + [message, {"role": "tool", "tool_call_id": call["id"], "content": result}]
    rendered = llm.render_chat_completion(turns, tools=tools)["prompt"]
    arguments = json.loads(call["function"]["arguments"])
    shown = [json.loads(line) for line in rendered.split("<|start_header_id|>assistant<|end_header_id|>\n\n")[1]
             .split("<|eot_id|>")[0].splitlines()]
    assert shown == [{"name": call["function"]["name"], "arguments": arguments}]
    assert "<|start_header_id|>ipython<|end_header_id|>\n\n" + result + "<|eot_id|>" in rendered
    assert rendered.endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")
    answer = llm.create_chat_completion(messages=turns, tools=tools, seed=7, max_tokens=24)
    (choice,) = answer["choices"]
    if choice["message"].get("tool_calls"):  # "auto": the model may call again
        assert choice["finish_reason"] in ("tool_calls", "length")
    else:
        assert isinstance(choice["message"]["content"], str) and choice["finish_reason"] in ("stop", "length")
    # The first request's prompt begins this one: the slot kept it (prefix reuse).
    assert answer["usage"]["prompt_tokens_details"]["cached_tokens"] >= reply["usage"]["prompt_tokens"]
    assert answer["usage"]["prompt_tokens"] > reply["usage"]["prompt_tokens"]

    # tool_choice naming a function gets a call of that one.
    forced = llm.create_chat_completion(messages=QUESTION, tools=tools, seed=7, max_tokens=256,
                                        tool_choice={"type": "function", "function": {"name": "get_time"}})
    (forced_call,) = forced["choices"][0]["message"]["tool_calls"]
    assert forced_call["function"]["name"] == "get_time"
    validate_call(forced_call, tools)

    # tool_choice "none": no call, the tools are not shown.
    plain = llm.create_chat_completion(messages=QUESTION, tools=tools, tool_choice="none", seed=7, max_tokens=8)
    assert "tool_calls" not in plain["choices"][0]["message"]
    assert "get_weather" not in llm.render_chat_completion(QUESTION, tools=tools, tool_choice="none")["prompt"]


@pytest.mark.parametrize("response_format", [
    {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}},  # OpenAI's
    {"type": "json_object", "schema": PERSON},  # llama-cpp-python's
], ids=["json_schema", "json_object_schema"])
def test_a_response_format_schema_holds_the_reply(llm, response_format):
    for seed in (1, 2, 3):
        reply = llm.create_chat_completion(messages=[{"role": "user", "content": "Describe a person as JSON."}],
                                           response_format=response_format, seed=seed, temperature=1.0,
                                           max_tokens=256)
        assert reply["choices"][0]["finish_reason"] == "stop"
        jsonschema.validate(json.loads(content(reply)), PERSON)


def test_a_stream_is_the_whole_reply_in_chunks(llm):
    request = dict(messages=QUESTION, seed=11, temperature=0.8, max_tokens=32)
    whole = llm.create_chat_completion(**request)
    chunks = list(llm.create_chat_completion(stream=True, stream_options={"include_usage": True}, **request))
    usage = chunks.pop()
    assert usage["choices"] == [] and usage["object"] == "chat.completion.chunk"
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        assert usage["usage"][key] == whole["usage"][key]
    assert len({c["id"] for c in chunks}) == 1 and all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    pieces = [c["choices"][0]["delta"].get("content") for c in chunks[1:-1]]
    assert len(pieces) > 3 and all(pieces)
    assert "".join(pieces) == content(whole)
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None] * (len(chunks) - 1) + \
        [whole["choices"][0]["finish_reason"]]
    assert chunks[-1]["choices"][0]["delta"] == {}

    # A tool call streams as OpenAI's deltas: the id and name first, then pieces of the arguments.
    request = dict(messages=QUESTION, tools=[WEATHER, CLOCK], tool_choice="required", seed=5, max_tokens=256)
    whole = llm.create_chat_completion(**request)["choices"][0]
    deltas = [c["choices"][0] for c in llm.create_chat_completion(stream=True, **request)]
    calls = [d["delta"]["tool_calls"][0] for d in deltas if d["delta"].get("tool_calls")]
    assert calls[0]["index"] == 0 and calls[0]["id"].startswith("call_") and calls[0]["type"] == "function"
    assert calls[0]["function"]["name"] == whole["message"]["tool_calls"][0]["function"]["name"]
    assert all(c["index"] == 0 and set(c) == {"index", "function"} for c in calls[1:]) and len(calls) > 2
    arguments = "".join(c["function"]["arguments"] for c in calls)
    assert arguments == whole["message"]["tool_calls"][0]["function"]["arguments"]
    assert deltas[-1]["finish_reason"] == "tool_calls"


def test_leaving_a_stream_early_stops_it_and_frees_the_slot(llm):
    eos = {str(t): -1e30 for t in (llm.token_eos(), llm.model.info["eot_id"]) if t >= 0}
    stream = llm.create_chat_completion(messages=QUESTION, max_tokens=0, logit_bias=eos, seed=1, stream=True)
    for i, _ in enumerate(stream):
        if i == 3:
            break
    stream.close()
    reply = llm.create_chat_completion(messages=QUESTION, max_tokens=4, seed=1)  # the slot is free again
    assert reply["usage"]["completion_tokens"] == 4


def test_embeddings_are_model_embeds_vectors(embedding_bundle):
    texts = ["The weather in Paris is mild.", "Emma Woodhouse, handsome, clever, and rich", "ternary weights"]
    with tern.Model(embedding_bundle) as model:
        expected = model.embed(texts)
        expected32 = model.embed(texts, dimensions=32)
        query = model.embed(texts, prompt="query") if "query" in model.embedding_info["prompts"] else None
    with Llama(model_path=embedding_bundle, embedding=True) as llm:
        reply = llm.create_embedding(texts)
        assert reply["object"] == "list" and reply["model"] == llm.model_path
        assert [d["index"] for d in reply["data"]] == [0, 1, 2] and all(d["object"] == "embedding" for d in reply["data"])
        vectors = numpy.array([d["embedding"] for d in reply["data"]], dtype=numpy.float32)
        assert vectors.shape == expected.shape and numpy.array_equal(vectors, expected)
        assert reply["usage"]["prompt_tokens"] == reply["usage"]["total_tokens"] > len(texts)
        assert numpy.array_equal(numpy.array(llm.embed(texts[1]), dtype=numpy.float32), expected[1])
        vector, count = llm.embed(texts, return_count=True)
        assert numpy.array_equal(numpy.array(vector, dtype=numpy.float32), expected)
        assert count == reply["usage"]["prompt_tokens"]
        packed = llm.create_embedding(texts[0], encoding_format="base64")["data"][0]["embedding"]
        raw = base64.b64decode(packed)
        assert numpy.array_equal(numpy.array(struct.unpack("<%df" % (len(raw) // 4), raw), dtype=numpy.float32),
                                 expected[0])
        short = llm.create_embedding(texts, dimensions=32)["data"]
        assert numpy.array_equal(numpy.array([d["embedding"] for d in short], dtype=numpy.float32), expected32)
        if query is not None:
            asked = llm.create_embedding(texts, prompt_name="query")["data"]
            assert numpy.array_equal(numpy.array([d["embedding"] for d in asked], dtype=numpy.float32), query)
        for bad, field in [([], "input"), ("", "input"), (["a", ""], "input[1]"), ([1, 2], "input"),
                           (texts, "encoding_format")]:
            with pytest.raises(ValueError) as e:
                llm.create_embedding(bad, encoding_format="hex" if field == "encoding_format" else "float")
            assert str(e.value).startswith(field), e.value


def shown(data):
    """Bytes as the library writes them as text: each byte that is not part of a whole UTF-8
    character as U+FFFD."""
    return re.sub("[\udc80-\udcff]", "\ufffd", data.decode("utf-8", "surrogateescape"))


def log_softmax(logits):
    x = numpy.asarray(logits, dtype=numpy.float64)
    m = x.max()
    return x - m - numpy.log(numpy.exp(x - m).sum())


def test_logprobs_are_the_log_softmax_of_the_logits(llm):
    n_top, n_tokens = 5, 12
    eos = {str(t): -1e30 for t in (llm.token_eos(), llm.model.info["eot_id"]) if t >= 0}
    reply = llm.create_chat_completion(messages=QUESTION, temperature=0, logprobs=True, top_logprobs=n_top,
                                       max_tokens=n_tokens, logit_bias=eos)
    (choice,) = reply["choices"]
    entries = choice["logprobs"]["content"]
    assert choice["finish_reason"] == "length" and len(entries) == reply["usage"]["completion_tokens"] == n_tokens
    # The tokens' bytes make the text (a byte that is no whole UTF-8 character shows as U+FFFD).
    assert shown(b"".join(bytes(e["bytes"]) for e in entries)) == content(reply)
    for e in entries:
        top = e["top_logprobs"]
        assert len(top) == n_top and e["logprob"] <= 0
        assert [t["logprob"] for t in top] == sorted((t["logprob"] for t in top), reverse=True)
        assert (e["token"], e["logprob"], e["bytes"]) == (top[0]["token"], top[0]["logprob"], top[0]["bytes"])
    # The same positions on a stateful session: the chosen token is the logits' argmax and its
    # log-probability their float64 log-softmax (greedy: temperature 1; the bias only lowers the
    # end tokens, which were not chosen).
    prompt = llm.render_chat_completion(QUESTION)["prompt"]
    with llm.session(temperature=0) as session:
        session.prefill(llm.tokenize(prompt, add_bos=False, special=True))
        for e in entries:
            logits = session.logits()
            for t in eos:
                logits[int(t)] = -numpy.inf
            expected = log_softmax(logits)
            token = int(numpy.argmax(expected))
            assert llm.detokenize([token]).decode() == shown(bytes(e["bytes"]))
            assert e["logprob"] == pytest.approx(expected[token], abs=1e-4)
            order = numpy.argsort(-expected)[:n_top]
            assert [t["logprob"] for t in e["top_logprobs"]] == pytest.approx(list(expected[order]), abs=1e-4)
            session.decode(token)
    # Sampled: the chosen token is one the distribution had, never above the most likely.
    sampled = llm.create_chat_completion(messages=QUESTION, temperature=1.0, seed=3, logprobs=True, top_logprobs=3,
                                         max_tokens=n_tokens)
    for e in sampled["choices"][0]["logprobs"]["content"]:
        assert e["logprob"] <= e["top_logprobs"][0]["logprob"] + 1e-6
        assert all(t["logprob"] == e["logprob"] for t in e["top_logprobs"] if t["bytes"] == e["bytes"])


def test_stateless_calls_repeat_with_a_seed_and_keep_no_settings(llm, llama3_bundle):
    request = dict(messages=QUESTION, temperature=0.9, seed=1234, max_tokens=24)
    texts = [content(llm.create_chat_completion(**request)) for _ in range(3)]
    assert texts[0] == texts[1] == texts[2] and texts[0]
    greedy = content(llm.create_chat_completion(messages=QUESTION, temperature=0, max_tokens=24))
    assert content(llm.create_chat_completion(**request)) == texts[0] != greedy  # not left greedy
    other = content(llm.create_chat_completion(**dict(request, seed=4321)))
    assert other != texts[0]
    with Llama(model_path=llama3_bundle) as fresh:  # no cached prefix: the same text
        assert content(fresh.create_chat_completion(**request)) == texts[0]
    # Calls without a seed take theirs from Llama(seed=...): the same sequence every run.
    runs = []
    for _ in range(2):
        with Llama(model_path=llama3_bundle, seed=99) as seeded:
            runs.append([content(seeded.create_chat_completion(messages=QUESTION, max_tokens=12)) for _ in range(2)])
    assert runs[0] == runs[1] and runs[0][0] != runs[0][1]


def tern_run_text(tern_run, bundle, prompt, n):
    r = subprocess.run([tern_run, bundle, "-p", prompt, "-n", str(n), "--temp", "0"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(prompt) and r.stdout.endswith("\n")
    return r.stdout[len(prompt):-1]


def test_completions_are_tern_runs_text(austen_bundle, tern_run):
    expected = tern_run_text(tern_run, austen_bundle, PROMPT, 24)
    with Llama(model_path=austen_bundle) as llm:
        reply = llm.create_completion(PROMPT, max_tokens=24, temperature=0)
        assert reply["object"] == "text_completion" and reply["id"].startswith("cmpl-")
        (choice,) = reply["choices"]
        assert choice["text"] == expected and choice["finish_reason"] == "length" and choice["logprobs"] is None
        assert reply["usage"]["completion_tokens"] == 24
        assert reply["usage"]["prompt_tokens"] == len(llm.tokenize(PROMPT))
        assert llm(PROMPT, max_tokens=24, temperature=0)["choices"][0]["text"] == expected
        assert llm(PROMPT, max_tokens=24, temperature=0, echo=True)["choices"][0]["text"] == PROMPT + expected
        assert llm.generate(PROMPT, max_tokens=24, temperature=0) == expected
        pieces = list(llm.generate(PROMPT, max_tokens=24, temperature=0, stream=True))
        assert len(pieces) > 3 and "".join(pieces) == expected
        chunks = list(llm.create_completion(PROMPT, max_tokens=24, temperature=0, stream=True))
        assert "".join(c["choices"][0]["text"] for c in chunks) == expected
        assert chunks[-1]["choices"][0]["finish_reason"] == "length"
        stop = expected[6:9]
        cut = llm.create_completion(PROMPT, max_tokens=24, temperature=0, stop=[stop])["choices"][0]
        assert cut["text"] == expected[:expected.index(stop)] and cut["finish_reason"] == "stop"
        scored = llm.create_completion(PROMPT, max_tokens=8, temperature=0, logprobs=2)["choices"][0]
        lp = scored["logprobs"]
        assert "".join(lp["tokens"]) == scored["text"] and len(lp["token_logprobs"]) == 8
        assert lp["text_offset"][0] == len(PROMPT) and all(len(t) == 2 for t in lp["top_logprobs"])
        assert all(max(t.values()) == p for t, p in zip(lp["top_logprobs"], lp["token_logprobs"]))
        # The prompt as its token ids (llm.tokenize adds the BOS, as a text prompt gets it): the same text.
        assert llm.create_completion(llm.tokenize(PROMPT.encode()), max_tokens=24, temperature=0)["choices"][0]["text"] == expected


def test_one_slot_serves_sessions_calls_and_embeddings_in_one_thread(austen_bundle, embedding_bundle):
    # What a session generates alone, then again with stateless calls and another session
    # taking the model's only slot in between: the same text (it is swapped out and back in).
    with tern.Model(austen_bundle) as model, model.session(temperature=0.8, seed=5) as alone:
        expected = [alone.generate(PROMPT, max_tokens=12).text()]
        positions = [alone.position]
        expected.append(alone.generate(" Then", max_tokens=12).text())
        positions.append(alone.position)
    with Llama(model_path=austen_bundle) as llm:
        assert llm.plan["sessions"] == 1
        session = llm.session(temperature=0.8, seed=5)
        first = session.generate(PROMPT, max_tokens=12).text()
        call = llm.create_completion("Emma", max_tokens=8, seed=1)  # takes the slot: the session is swapped out
        other = llm.session(temperature=0)  # and another session on the same slot
        other.generate("Mr. Knightley", max_tokens=6).text()
        assert session.position == positions[0]  # known while swapped out
        second = session.generate(" Then", max_tokens=12).text()
        assert [first, second] == expected and session.position == positions[1]
        assert llm.create_completion("Emma", max_tokens=8, seed=1)["choices"][0]["text"] == call["choices"][0]["text"]
        assert other.generate(" and", max_tokens=4).text()
        # A stream still being read, and a call in the same thread: the call waits for the
        # stream's run to end, never for its reader.
        stream = llm.create_completion(PROMPT, max_tokens=16, temperature=0, stream=True)
        head = next(stream)["choices"][0]["text"]
        middle = llm.create_completion(PROMPT, max_tokens=16, temperature=0)["choices"][0]["text"]
        assert head + "".join(c["choices"][0]["text"] for c in stream) == middle
        session.close()
        other.close()
    with Llama(model_path=embedding_bundle) as llm, llm.session() as session:
        assert llm.model.info["n_sessions"] == 1
        vector = llm.embed("Emma Woodhouse")
        assert numpy.array_equal(session.embed("Emma Woodhouse")[0], numpy.array(vector, dtype=numpy.float32))
        assert llm.create_embedding("Emma Woodhouse")["data"][0]["embedding"] == vector
        assert numpy.array_equal(llm.model.embed("Emma Woodhouse")[0], numpy.array(vector, dtype=numpy.float32))


def test_a_drafting_session_gives_its_draft_slot_back_while_swapped_out(austen_bundle, bundle_dir):
    # Speculative greedy decoding writes the greedy text; the drafting session takes the draft
    # model's only slot while it is in, and leaves it while another session has its own slot.
    with Llama(model_path=converted(bundle_dir, "tiny-austen-draft.tern")) as draft, \
            Llama(model_path=austen_bundle, n_draft=4) as llm:
        expected = draft.generate(PROMPT, max_tokens=8, temperature=0)
        session = llm.session(temperature=0, n_draft=4, draft_model=draft.model)
        first = session.generate(PROMPT, max_tokens=12)
        text = first.text()
        assert first.stats["drafted_tokens"] > 0
        with llm.session(temperature=0) as plain:  # the main model's only slot: the drafter is swapped out
            greedy = plain.generate(PROMPT, max_tokens=24).text()
        assert draft.generate(PROMPT, max_tokens=8, temperature=0) == expected  # its slot is free
        rest = session.generate("", max_tokens=12)
        text += rest.text()
        assert rest.stats["drafted_tokens"] > 0 and text == greedy
        session.close()
        assert draft.generate(PROMPT, max_tokens=8, temperature=0) == expected


def test_each_conversation_returns_to_the_slot_that_holds_it(austen_bundle):
    # Two conversations taking turns on two slots: each next turn runs on the slot whose
    # cache begins its prompt (the most recently used slot holds the other conversation).
    with Llama(model_path=austen_bundle, n_sessions=2) as llm:
        talks = [[{"role": "user", "content": "Who is Emma?"}], [{"role": "user", "content": "Where is Highbury?"}]]
        first = []
        for talk in talks:
            reply = llm.create_chat_completion(messages=talk, seed=1, max_tokens=8)
            talk += [reply["choices"][0]["message"], {"role": "user", "content": "And then?"}]
            first.append(reply["usage"]["prompt_tokens"])
        for talk, tokens in zip(talks, first):
            reply = llm.create_chat_completion(messages=talk, seed=1, max_tokens=8)
            assert reply["usage"]["prompt_tokens_details"]["cached_tokens"] >= tokens


def test_threads_sharing_one_slot_wait_or_time_out(austen_bundle, llama3_bundle):
    prompts = [PROMPT, "Emma Woodhouse, handsome, clever, and rich", "Mr. Knightley"]
    with Llama(model_path=austen_bundle) as llm:  # one slot, no timeout: everyone waits
        serial = [llm.generate(p, max_tokens=64, seed=i, temperature=0.8) for i, p in enumerate(prompts)]
        results = [None] * 3
        barrier = threading.Barrier(3)

        def work(i):
            barrier.wait()
            results[i] = llm.generate(prompts[i], max_tokens=64, seed=i, temperature=0.8)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == serial

    with Llama(model_path=llama3_bundle, slot_timeout=0.05) as llm:  # calls of ~1 s, waits of 50 ms
        eos = {str(t): -1e30 for t in (llm.token_eos(), llm.model.info["eot_id"]) if t >= 0}
        outcomes = [None] * 3
        barrier = threading.Barrier(3)

        def work(i):
            barrier.wait()
            try:
                outcomes[i] = llm.create_completion(PROMPT, max_tokens=48, logit_bias=eos, seed=i)
            except tern.TernError as e:
                outcomes[i] = e

        threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        errors = [o for o in outcomes if isinstance(o, tern.TernError)]
        done = [o for o in outcomes if isinstance(o, dict)]
        assert len(errors) + len(done) == 3 and errors and done
        for e in errors:
            assert e.status == tern.Status.INVALID_STATE
            assert "all 1 session slots" in e.message and "slot_timeout" in e.message and "waited" in e.message


def test_bad_requests_name_the_field(llm):
    tools = [WEATHER]
    good = dict(messages=QUESTION)
    cases = [
        (dict(messages=[]), "messages"),
        (dict(messages=[{"role": "robot", "content": "hi"}]), "messages[0].role"),
        (dict(messages=[{"role": "user"}]), "messages[0].content"),
        (dict(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]),
         "messages[0].content[0]"),
        (dict(messages=QUESTION + [{"role": "assistant", "tool_calls": [{"type": "function"}]}]),
         "messages[2].tool_calls[0]"),
        (dict(good, tools=[{"type": "function", "function": {"name": "bad name"}}]), "tools[0].function.name"),
        (dict(good, tools=tools, tool_choice="sometimes"), "tool_choice"),
        (dict(good, tools=tools, tool_choice={"type": "function", "function": {"name": "nope"}}),
         "tool_choice.function.name"),
        (dict(good, tool_choice="required"), "tool_choice"),
        (dict(good, response_format={"type": "xml"}), "response_format.type"),
        (dict(good, response_format={"type": "json_schema"}), "response_format.json_schema"),
        (dict(good, temperature=-1), "temperature"),
        (dict(good, top_p=0), "top_p"),
        (dict(good, top_k=1.5), "top_k"),
        (dict(good, seed=-5), "seed"),
        (dict(good, stop=["a"] * 9), "stop"),
        (dict(good, stop="x" * 65), "stop"),
        (dict(good, max_tokens="many"), "max_tokens"),
        (dict(good, logit_bias={"word": 1}), "logit_bias"),
        (dict(good, logit_bias={str(llm.n_vocab()): 1}), "logit_bias"),
        (dict(good, top_logprobs=3), "top_logprobs"),
        (dict(good, logprobs=True, top_logprobs=21), "top_logprobs"),
        (dict(good, stream_options={"include_usage": True}), "stream_options"),
        (dict(good, functions=[{"name": "f"}]), "functions"),
        (dict(good, grammar='root ::= "a"', tools=tools), "grammar"),
    ]
    for request, field in cases:
        with pytest.raises(tern.RequestError) as e:
            llm.create_chat_completion(**request)
        assert isinstance(e.value, ValueError) and e.value.status == tern.Status.INVALID_ARGUMENT
        assert e.value.message.startswith(field), (field, e.value.message)
    for request, field in [(dict(prompt=["a"]), "prompt"), (dict(prompt="a", suffix="b"), "suffix"),
                           (dict(prompt="a", logprobs=True), "logprobs"), (dict(prompt="a", echo=True, logprobs=1),
                                                                            "echo")]:
        with pytest.raises(ValueError) as e:
            llm.create_completion(**request)
        assert str(e.value).startswith(field), e.value
    # What the library refuses comes back as its TernError, naming the problem.
    with pytest.raises(tern.TernError) as e:
        llm.create_chat_completion(messages=QUESTION, response_format={
            "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string", "pattern": "^a+$"}}})
    assert e.value.status == tern.Status.UNSUPPORTED_SCHEMA and "pattern" in e.value.message
    with pytest.raises(tern.TernError) as e:
        llm.create_chat_completion(messages=QUESTION, grammar='root ::= "unterminated')
    assert e.value.status == tern.Status.INVALID_GRAMMAR
    with pytest.raises(tern.TernError) as e:
        llm.create_chat_completion(messages=[{"role": "user", "content": " Emma" * 6000}], max_tokens=1)
    assert e.value.status == tern.Status.PROMPT_TOO_LONG
    with pytest.raises(TypeError):
        Llama(model_path=llm.model_path, n_gpu_layers=-1)


def test_the_plan_is_the_planners(llama3_bundle, embedding_bundle):
    for path in (llama3_bundle, embedding_bundle):
        with Llama(model_path=path) as llm:
            plan = llm.plan
            row = tern.plan(path, [plan["kv_mode"]], n_ctx=plan["context_tokens"])[0]
            assert row["status"] == "OK"
            assert plan["planned_total_bytes"] == row["total_bytes"] and plan["session_bytes"] == row["session_bytes"]
            assert plan["context_tokens"] == llm.n_ctx() and plan["sessions"] == 1
        with pytest.raises(tern.TernError) as e:
            llm.create_embedding("x")
        assert e.value.status == tern.Status.INVALID_STATE and "closed" in e.value.message
