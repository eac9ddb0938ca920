#!/usr/bin/env python3
"""JSON Schema-constrained generation against an independent validator (python3-jsonschema).

More than 100 schemas, written by hand (every supported keyword) and generated from a fixed
seed, each turned into a grammar by tern_json_schema_to_grammar and sampled several times
with tiny-austen at temperature 1 (tern-schema-generate). Every output must parse as JSON
(Python's json module) and validate against its schema (jsonschema's Draft 2020-12 validator
with its format checker; date, time and date-time are checked here too, by datetime), and
end because the grammar was complete. Schemas with keywords the grammar cannot honour must be
refused with UNSUPPORTED_SCHEMA naming the keyword.

  json_schema_test.py --generate TERN_SCHEMA_GENERATE --bundle tiny-austen-packed.tern
                      [--emulator=QEMU,ARG,...] [--generations 3] [--every 1]
Fails (never skips) when jsonschema or a file is missing.
"""
import argparse
import datetime
import json
import os
import random
import re
import sys

import jsonl_tool

try:
    import jsonschema
except ImportError:
    print("FAILED: python3-jsonschema is not installed (.ci/deps installs it)")
    sys.exit(1)

S = {"type": "string", "maxLength": 16}
HAND_WRITTEN = [
    {"type": "string"},
    {"type": "string", "minLength": 2, "maxLength": 6},
    {"type": "integer"},
    {"type": "number"},
    {"type": "boolean"},
    {"type": "null"},
    {"type": "integer", "minimum": 18, "maximum": 120},
    {"type": "integer", "minimum": -40, "maximum": -3},
    {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10},
    {"type": "integer", "minimum": -999, "maximum": 12345},
    {"type": "integer", "minimum": 7},
    {"type": "integer", "maximum": -7},
    {"type": "integer", "minimum": 2.5, "maximum": 7.5},
    {"type": "number", "minimum": 0, "maximum": 1},
    {"type": "number", "minimum": -3, "exclusiveMaximum": 10},
    {"type": "number", "exclusiveMinimum": -1, "exclusiveMaximum": 1},
    {"type": "number", "minimum": 100},
    {"type": "number", "minimum": -3},  # 3.0 as well as -3.0: the zero fraction after every integer
    {"enum": [1, "a", 2.0, None, 3.5, 1e1], "type": "integer"},  # "type" beside "enum" filters it
    {"enum": ["x", 1, None, [2]], "type": ["string", "null"]},
    {"const": "k", "type": "string"},
    {"type": "string", "format": "date"},
    {"type": "string", "format": "time"},
    {"type": "string", "format": "date-time"},
    {"type": "string", "format": "uuid"},
    {"enum": ["red", "green", "blue"]},
    {"enum": [1, 2.5, "three", None, True, {"a": [1, 2]}, ["x"]]},
    {"const": "fixed"},
    {"const": {"k": [1, {"z": None}], "s": "q\"uote"}},
    {"enum": ["caf\u00e9", "\u6771\u4eac", "tab\there", "back\\slash"]},
    {"type": ["string", "null"], "maxLength": 5},
    {"type": ["integer", "boolean"]},
    {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 9}, {"type": "string", "maxLength": 3}]},
    {"oneOf": [{"type": "boolean"}, {"type": "null"}]},
    {"allOf": [{"type": "integer", "minimum": 5, "maximum": 6}]},
    {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 99}, "maxItems": 5},
    {"type": "array", "items": S, "minItems": 2, "maxItems": 3},
    {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 1, "maxItems": 1},
    {"type": "array", "maxItems": 0},
    {"type": "array", "items": {"type": "array", "items": {"type": "boolean"}, "maxItems": 2}, "maxItems": 3},
    {"type": "object", "properties": {"name": S, "age": {"type": "integer", "minimum": 0, "maximum": 150}},
     "required": ["name", "age"], "additionalProperties": False},
    {"type": "object", "properties": {"a": S, "b": {"type": "boolean"}, "c": {"type": "null"}},
     "required": ["b"], "additionalProperties": False},
    {"type": "object", "properties": {"x": {"type": "integer", "maximum": 9, "minimum": 0},
                                      "y": {"type": "integer", "maximum": 9, "minimum": 0}},
     "additionalProperties": False},
    {"type": "object", "properties": {"p": {"type": "boolean"}}, "required": ["p"],
     "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 9}},
    {"type": "object", "properties": {"key": {"type": "boolean"}, "k": {"type": "null"}},
     "additionalProperties": {"type": "boolean"}},
    {"type": "object", "additionalProperties": False},
    {"type": "object", "required": ["must"], "additionalProperties": {"type": "integer", "minimum": 1, "maximum": 3}},
    {"type": "object", "properties": {"caf\u00e9": {"type": "integer", "minimum": 0, "maximum": 5},
                                      "q\"uote": {"type": "boolean"}, "t\tab": {"const": 1}},
     "required": ["caf\u00e9", "q\"uote", "t\tab"], "additionalProperties": False},
    {"type": "object", "properties": {"when": {"type": "string", "format": "date-time"},
                                      "id": {"type": "string", "format": "uuid"},
                                      "day": {"type": "string", "format": "date"}},
     "required": ["when", "id", "day"], "additionalProperties": False},
    {"type": "object", "properties": {
        "person": {"type": "object", "properties": {"first": S, "last": S}, "required": ["first", "last"],
                   "additionalProperties": False},
        "pets": {"type": "array", "items": {"$ref": "#/$defs/pet"}, "maxItems": 2}},
     "required": ["person", "pets"], "additionalProperties": False,
     "$defs": {"pet": {"type": "object", "properties": {"kind": {"enum": ["cat", "dog"]},
                                                         "age": {"type": "integer", "minimum": 0, "maximum": 30}},
                       "required": ["kind", "age"], "additionalProperties": False}}},
    # Recursion through $ref: a tree (kept small by maxItems).
    {"$ref": "#/definitions/node",
     "definitions": {"node": {"type": "object", "properties": {
         "v": {"type": "integer", "minimum": 0, "maximum": 9},
         "kids": {"type": "array", "items": {"$ref": "#/definitions/node"}, "maxItems": 2}},
         "required": ["v", "kids"], "additionalProperties": False}}},
    {"type": "object", "properties": {"tag": {"const": "circle"}, "r": {"type": "number", "minimum": 0, "maximum": 10}},
     "required": ["tag", "r"], "additionalProperties": False, "title": "Circle", "description": "annotations pass"},
    {"anyOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/b"}],
     "$defs": {"a": {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 1}},
                     "required": ["a"], "additionalProperties": False},
               "b": {"type": "array", "items": {"type": "null"}, "maxItems": 2}}},
    True,
    {},
    {"type": "object", "properties": {"free": True, "none_extra": {"type": "boolean"}}, "required": ["free"],
     "additionalProperties": False},
    {"type": "object", "properties": {"deep": {"type": "object", "properties": {"deeper": {"type": "object",
        "properties": {"deepest": {"type": "array", "items": {"type": "integer", "minimum": -5, "maximum": 5},
                                   "maxItems": 3}}, "required": ["deepest"], "additionalProperties": False}},
        "required": ["deeper"], "additionalProperties": False}}, "required": ["deep"], "additionalProperties": False},
]

UNSUPPORTED = [
    ({"type": "string", "pattern": "^a+$"}, "pattern"),
    ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, "uniqueItems"),
    ({"type": "number", "multipleOf": 3}, "multipleOf"),
    ({"not": {"type": "null"}}, "not"),
    ({"type": "object", "patternProperties": {"^x": {"type": "integer"}}}, "patternProperties"),
    ({"type": "object", "minProperties": 2}, "minProperties"),
    ({"if": {"type": "string"}, "then": {"maxLength": 2}}, "if"),
    ({"type": "string", "format": "email"}, "email"),
    ({"allOf": [{"type": "integer"}, {"minimum": 3}]}, "allOf"),
    ({"type": "number", "minimum": 1.5}, "minimum"),
    ({"type": "object", "properties": {"inner": {"type": "array", "contains": {"const": 1}}}}, "contains"),
    ({"$ref": "https://example.com/schema.json"}, "another document"),
    ({"type": "array", "prefixItems": [{"type": "integer"}]}, "prefixItems"),
    (False, "false"),
    ({"const": 1, "type": "string"}, "const"),  # "type" excludes the one value: nothing matches
    ({"enum": [1, 2], "type": "string"}, "enum"),
    ({"enum": []}, "enum"),
    ({"oneOf": [{"type": "integer"}, {"minimum": 2}]}, "oneOf"),  # 3 would match both branches
    ({"type": "array", "items": [{"type": "integer"}]}, "'items' as an array"),
]


def generated_schemas(count, seed):
    """Random schemas over the supported keywords, bounded so that sampling ends in time."""
    rng = random.Random(seed)
    names = ["id", "name", "value", "x", "y", "caf\u00e9", "\u540d\u524d", "q\"t", "a b", "items", "n1", "flag"]

    def scalar():
        return rng.choice([rng.randrange(-50, 50), round(rng.uniform(-9, 9), 2), rng.choice(names), True, False, None])

    def schema(depth):
        kinds = ["string", "integer", "number", "boolean", "null", "enum", "const", "format", "union"]
        if depth < 3:
            kinds += ["array", "object", "object", "anyOf"]
        kind = rng.choice(kinds)
        if kind == "string":
            hi = rng.randrange(1, 20)
            s = {"type": "string", "maxLength": hi}
            if rng.random() < 0.3:
                s["minLength"] = rng.randrange(0, hi + 1)
            return s
        if kind == "integer":
            s = {"type": "integer"}
            lo = rng.randrange(-1000, 1000)
            if rng.random() < 0.7:
                s["exclusiveMinimum" if rng.random() < 0.3 else "minimum"] = lo
            if rng.random() < 0.7:
                s["exclusiveMaximum" if rng.random() < 0.3 else "maximum"] = lo + rng.randrange(2, 5000)
            return s
        if kind == "number":
            s = {"type": "number"}
            lo = rng.randrange(-100, 100)
            if rng.random() < 0.6:
                s["minimum"] = lo
            if rng.random() < 0.6:
                s["maximum"] = lo + rng.randrange(1, 300)
            return s
        if kind in ("boolean", "null"):
            return {"type": kind}
        if kind == "enum":
            values = []
            for _ in range(rng.randrange(1, 5)):
                v = scalar()
                if v not in values:
                    values.append(v)
            return {"enum": values}
        if kind == "const":
            return {"const": scalar()}
        if kind == "format":
            return {"type": "string", "format": rng.choice(["date", "time", "date-time", "uuid"])}
        if kind == "union":
            return {"type": [rng.choice(["string", "integer", "boolean"]), "null"], "maxLength": 8}
        if kind == "anyOf":
            return {"anyOf": [schema(depth + 1) for _ in range(rng.randrange(2, 4))]}
        if kind == "array":
            lo = rng.randrange(0, 3)
            return {"type": "array", "items": schema(depth + 1), "minItems": lo, "maxItems": lo + rng.randrange(0, 3)}
        props = {}
        for _ in range(rng.randrange(1, 5)):
            props[rng.choice(names)] = schema(depth + 1)
        s = {"type": "object", "properties": props}
        keys = list(props)
        required = [k for k in keys if rng.random() < 0.6]
        if required:
            s["required"] = required
        # Other keys are unbounded strings (a small model may write prose into one): the
        # hand-written schemas cover them.
        s["additionalProperties"] = False
        return s

    out = []
    while len(out) < count:
        out.append(schema(0))
    return out


def bounded(schema):
    """Whether sampling is sure to end: every string, array and object bounded. tiny-austen
    writes prose into an open string (or key) and may not close it within the context."""
    if schema is True or schema == {}:
        return False
    if not isinstance(schema, dict):
        return True
    if "const" in schema or "enum" in schema:
        return True
    parts = [v for k in ("anyOf", "oneOf", "allOf") for v in schema.get(k, [])]
    parts += list(schema.get("$defs", {}).values()) + list(schema.get("definitions", {}).values())
    if not all(bounded(p) for p in parts):
        return False
    types = schema.get("type", [])
    types = [types] if isinstance(types, str) else types
    if "string" in types and "maxLength" not in schema and "format" not in schema:
        return False
    if "array" in types and ("maxItems" not in schema or not bounded(schema.get("items", True))):
        return False
    if "object" in types or "properties" in schema:
        if schema.get("additionalProperties", True) is not False:
            return False
        if any(r not in schema.get("properties", {}) for r in schema.get("required", [])):
            return False
        if not all(bounded(v) for v in schema.get("properties", {}).values()):
            return False
    return True


def resolve(root, ref):
    at = root
    for part in ref[1:].split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        at = at[int(part)] if isinstance(at, list) else at[part]
    return at


CHARS = "abcXYZ019 _-.,\u00e9\u6771\u00a0\U0001F600\"\\\n\t/\x01"


def instance(s, root, rng, depth=0):
    """A value valid against the schema, properties in the schema's order (the grammar's)."""
    if s is True or s == {}:
        return rng.choice([None, 1, -2.5, "x\"y", [1, "a"], {"k": True}, [], {}])
    deep = depth > 4  # recursive schemas: the least each level needs
    if "$ref" in s:
        return instance(resolve(root, s["$ref"]), root, rng, depth + 1)
    if "const" in s or "enum" in s:
        values = [s["const"]] if "const" in s else s["enum"]
        if "type" in s:  # what "type" admits of them (the grammar spells only those)
            values = [v for v in values if jsonschema.Draft202012Validator({"type": s["type"]}).is_valid(v)]
        return rng.choice(values)
    for k in ("anyOf", "oneOf"):
        if k in s:
            return instance(rng.choice(s[k]), root, rng, depth + 1)
    if "allOf" in s:
        return instance(s["allOf"][0], root, rng, depth + 1)
    t = s.get("type")
    if isinstance(t, list):
        t = rng.choice(t)
    if t is None:
        t = ("object" if "properties" in s or "required" in s or "additionalProperties" in s else
             "array" if "items" in s or "maxItems" in s else "number" if "minimum" in s or "maximum" in s else None)
        if t is None:
            return instance(True, root, rng, depth + 1)
    if t == "string":
        f = s.get("format")
        if f == "date":
            return rng.choice(["2024-02-29", "1999-12-31", "0001-01-01", "2023-06-30"])
        if f == "time":
            return rng.choice(["00:00:00Z", "23:59:59.123+05:30", "12:34:56-08:00"])
        if f == "date-time":
            return rng.choice(["2024-02-29T12:00:00Z", "2000-01-01t00:00:00.5-01:00"])
        if f == "uuid":
            return "123e4567-e89b-12d3-a456-42661417400" + str(rng.randrange(10))
        lo = s.get("minLength", 0)
        hi = s.get("maxLength", lo + 8)
        return "".join(rng.choice(CHARS) for _ in range(rng.randrange(lo, min(hi, lo + 8) + 1)))
    if t in ("integer", "number"):
        lo = s.get("minimum", s["exclusiveMinimum"] + 1 if "exclusiveMinimum" in s else -1000)
        hi = s.get("maximum", s["exclusiveMaximum"] - 1 if "exclusiveMaximum" in s else lo + 2000)
        lo, hi = int(-(-lo // 1)), int(hi // 1)
        v = rng.randrange(lo, hi + 1)
        if t == "number" and rng.random() < 0.5 and v < hi:
            v = round(v + rng.choice([0.5, 0.25, 0.125, 0.001]), 3)
        return v
    if t == "boolean":
        return rng.random() < 0.5
    if t == "null":
        return None
    if t == "array":
        lo = s.get("minItems", 0)
        hi = s.get("maxItems", lo + 3)
        n = lo if deep else rng.randrange(lo, min(hi, lo + 3) + 1)
        return [instance(s.get("items", True), root, rng, depth + 1) for _ in range(n)]
    out = {}
    props = s.get("properties", {})
    required = s.get("required", [])
    for k, sub in props.items():
        if k in required or (not deep and rng.random() < 0.5):
            out[k] = instance(sub, root, rng, depth + 1)
    extra = s.get("additionalProperties", True)
    for k in required:
        if k not in out:
            out[k] = instance(extra if isinstance(extra, dict) else True, root, rng, depth + 1)
    if extra is not False and not deep:
        for i in range(rng.randrange(0, 3)):
            name = "extra%d_%s" % (i, rng.choice(["", "é", "x y"]))
            if name not in props:
                out[name] = instance(extra if isinstance(extra, dict) else True, root, rng, depth + 1)
    return out


def format_errors(value, schema):
    """date, time and date-time checked with datetime (besides jsonschema's checker)."""
    errors = []

    def walk(v, s):
        if isinstance(s, dict) and isinstance(v, str) and s.get("format"):
            f = s["format"]
            try:
                if f == "date":
                    datetime.date.fromisoformat(v)
                elif f == "time":
                    m = re.fullmatch(r"(\d\d:\d\d:\d\d(?:\.\d+)?)(Z|[+-]\d\d:\d\d)", v)
                    if not m:
                        raise ValueError("not HH:MM:SS[.f](Z|+HH:MM)")
                    datetime.time.fromisoformat(m.group(1)[:15])
                elif f == "date-time":
                    m = re.fullmatch(r"(\d{4}-\d\d-\d\d)[Tt](\d\d:\d\d:\d\d(?:\.\d+)?)(Z|[+-]\d\d:\d\d)", v)
                    if not m:
                        raise ValueError("not a date-time")
                    datetime.date.fromisoformat(m.group(1))
                    datetime.time.fromisoformat(m.group(2)[:15])
            except ValueError as e:
                errors.append(f"{f} {v!r}: {e}")
        if isinstance(s, dict) and isinstance(v, dict):
            for k, x in v.items():
                if k in s.get("properties", {}):
                    walk(x, s["properties"][k])
        if isinstance(s, dict) and isinstance(v, list) and isinstance(s.get("items"), dict):
            for x in v:
                walk(x, s["items"])

    walk(value, schema)
    return errors


def check_instances(schemas, args):
    """Every schema's grammar against jsonschema on texts, without sampling: valid instances in
    the grammar's spelling (properties in the schema's order, constants and names in UTF-8 with
    JSON's required escapes, white space compact, spaced or indented) must be sentences, and
    any mutation of them the grammar accepts must parse and validate (the grammar never lets
    through what the schema refuses). Uses tern-grammar-check (--schema, then the grammars)."""
    check = os.path.join(os.path.dirname(args.generate), "tern-grammar-check")
    cmd = [w for w in args.emulator.split(",") if w] + [check]
    answers = jsonl_tool.ask(cmd + ["--schema"], [{"schema": s} for s in schemas])
    rng = random.Random(26)
    requests, meta = [], []
    for i, (schema, answer) in enumerate(zip(schemas, answers)):
        if not answer["ok"]:
            continue  # reported by the sampling part
        texts, valid = [], []
        for _ in range(6):
            v = instance(schema, schema, rng)
            spell = rng.choice([dict(separators=(",", ":")), dict(), dict(indent=2)])
            t = json.dumps(v, ensure_ascii=False, **spell) + rng.choice(["", " ", "\n"])
            texts.append(t)
            valid.append(t)
            for _ in range(4):
                m = list(t)
                j = rng.randrange(len(m) + 1)
                op = rng.randrange(3)
                if op == 0 and m:
                    del m[min(j, len(m) - 1)]
                elif op == 1:
                    m.insert(j, rng.choice('{}[]",:0-1ae \\'))
                elif m:
                    m[min(j, len(m) - 1)] = rng.choice('{}[]",:0-1ae \\')
                texts.append("".join(m))
        requests.append({"grammar": answer["grammar"], "texts": texts})
        meta.append((i, schema, texts, set(valid)))
    results = jsonl_tool.ask(cmd, requests)
    failures, accepted_mutants, checked = 0, 0, 0
    for (i, schema, texts, valid), result in zip(meta, results):
        if not result["ok"]:
            failures += 1
            print(f"FAILED: schema {i}: its grammar does not compile: {result['error']}")
            continue
        validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.draft202012_format_checker)
        for t, accepted in zip(texts, result["accepted"]):
            checked += 1
            if t in valid:
                errors = [e.message for e in validator.iter_errors(json.loads(t))] + format_errors(json.loads(t), schema)
                if errors:
                    print(f"FAILED (test generator): schema {i}: {t!r} is not valid: {errors}")
                    failures += 1
                elif not accepted:
                    failures += 1
                    print(f"FAILED: schema {i}: the grammar refuses the valid {t!r}\n  schema {json.dumps(schema)}")
                continue
            if accepted:
                accepted_mutants += 1
                try:
                    value = json.loads(t)
                    errors = [e.message for e in validator.iter_errors(value)] + format_errors(value, schema)
                except json.JSONDecodeError as e:
                    errors = [f"not JSON: {e}"]
                if errors:
                    failures += 1
                    print(f"FAILED: schema {i}: the grammar accepts {t!r}: {'; '.join(errors)}\n  schema {json.dumps(schema)}")
    print(f"{len(requests)} grammars against jsonschema on {checked} texts ({accepted_mutants} mutations accepted and "
          f"valid): {failures} failure(s)")
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--generate", required=True)
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--emulator", default="")
    ap.add_argument("--generations", type=int, default=3)
    ap.add_argument("--every", type=int, default=1, help="test every n-th schema (slow emulation)")
    args = ap.parse_args()
    for path in (args.generate, args.bundle):
        if not os.path.exists(path):
            print(f"FAILED: {path} is missing")
            sys.exit(1)
    every = HAND_WRITTEN + generated_schemas(70, 24)
    failures = check_instances(every, args)
    # Sampling: the schemas whose outputs must end (bounded()), every --every-th of them.
    schemas = [s for s in every if bounded(s)][::args.every]
    requests = [{"schema": s, "seeds": list(range(1, args.generations + 1)), "max_tokens": 480} for s in schemas]
    requests += [{"schema": s, "seeds": []} for s, _ in UNSUPPORTED]
    cmd = [w for w in args.emulator.split(",") if w] + [args.generate, args.bundle]
    answers = jsonl_tool.ask(cmd, requests)
    outputs, tokens = 0, 0
    # The 2020-12 checker ("time" is RFC 3339's full-time there; the default checker mixes in
    # draft 3's HH:MM:SS).
    checker = jsonschema.draft202012_format_checker
    for i, (schema, answer) in enumerate(zip(schemas, answers)):
        if not answer["ok"]:
            failures += 1
            print(f"FAILED: schema {i} refused: {answer['error']}\n  {json.dumps(schema)}")
            continue
        validator = jsonschema.Draft202012Validator(schema, format_checker=checker)
        for o in answer["outputs"]:
            outputs += 1
            where = f"schema {i} seed {o['seed']}"
            if "error" in o:
                failures += 1
                print(f"FAILED: {where}: {o['error']}")
                continue
            tokens += o["tokens"]
            text = o["text"]
            problems = []
            if o["stop"] != "end":
                problems.append(f"stopped by {o['stop']} after {o['tokens']} tokens, not at the grammar's end")
            try:
                value = json.loads(text)
                problems += [e.message for e in validator.iter_errors(value)]
                problems += format_errors(value, schema)
            except json.JSONDecodeError as e:
                problems.append(f"not JSON: {e}")
            if problems:
                failures += 1
                print(f"FAILED: {where}: {'; '.join(problems)}\n  schema {json.dumps(schema)}\n  output {text!r}")
    for (schema, keyword), answer in zip(UNSUPPORTED, answers[len(schemas):]):
        if answer["ok"] or answer["status"] != "UNSUPPORTED_SCHEMA" or keyword not in answer["error"]:
            failures += 1
            print(f"FAILED: {json.dumps(schema)} must be refused naming {keyword!r}: {answer}")
    print(f"{len(schemas)} schemas, {outputs} outputs ({tokens} tokens) validated, {len(UNSUPPORTED)} refusals: "
          f"{failures} failure(s)")
    if len(schemas) * args.every < 100:
        print(f"FAILED: {len(schemas) * args.every} sampled schemas, fewer than 100")
        failures += 1
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
