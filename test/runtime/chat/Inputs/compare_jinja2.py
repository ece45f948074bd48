"""Differential test of sits' chat template engine against jinja2.

Renders every case of a corpus (see jinja-corpus.txt for the format) with
jinja2, configured exactly as transformers configures it (its own compile
function: ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, its
tojson, raise_exception, strftime_now, namespace and dict), and with
`sits-render-template --batch`, then compares byte for byte. A case agrees
when both outputs are equal or both fail; when jinja2 fails in
raise_exception, the sits error must contain its message.

usage: compare_jinja2.py DRIVER CORPUS
       compare_jinja2.py --dump-jinja2 CORPUS OUT.json
           (jinja2's outcomes alone, with the jinja2 and transformers
           versions, to compare machines whose versions differ)
"""

import datetime as real_datetime
import json
import os
import subprocess
import sys
import tempfile

import jinja2
from transformers.utils import chat_template_utils


def parse_corpus(path):
    cases = []
    current = None
    body = []

    def finish():
        if current is None:
            return
        if "template" not in current:
            current["template"] = "\n".join(body)
        cases.append(current)

    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for line in lines:
        if line.startswith("#### CASE "):
            finish()
            current = {"name": line[len("#### CASE "):].strip(),
                       "variables_json": "{}", "now": ""}
            body = []
        elif current is None:
            continue  # the file's preamble
        elif line.startswith("#### VARS "):
            current["variables_json"] = line[len("#### VARS "):]
        elif line.startswith("#### NEEDS "):
            current["needs"] = line[len("#### NEEDS "):].strip()
        elif line.startswith("#### NOW "):
            current["now"] = line[len("#### NOW "):]
        elif line.startswith("#### RAW "):
            current["template"] = json.loads(line[len("#### RAW "):])
        else:
            body.append(line)
    finish()
    return cases


class FixedDatetime(real_datetime.datetime):
    fixed = None

    @classmethod
    def now(cls, tz=None):
        return cls.fixed


def render_jinja(case):
    """(output, None) or (None, (exception type name, message))."""
    if case["now"]:
        FixedDatetime.fixed = real_datetime.datetime.strptime(
            case["now"], "%Y-%m-%d %H:%M:%S")
        chat_template_utils.datetime = FixedDatetime
    else:
        chat_template_utils.datetime = real_datetime.datetime
    try:
        compiled = chat_template_utils._compile_jinja_template(
            case["template"])
        variables = json.loads(case["variables_json"])
        return compiled.render(**variables), None
    except Exception as e:  # noqa: BLE001 - any failure is an outcome
        return None, (type(e).__name__, str(e), type(e) is
                      jinja2.exceptions.TemplateError)


def namespace_underscore_guard():
    """Whether this transformers refuses underscore-prefixed namespace
    attributes (its sandbox gained the guard in the 5.x series; sits has it)."""
    compiled = chat_template_utils._compile_jinja_template(
        "{% set ns = namespace() %}{% set ns._a = 1 %}")
    try:
        compiled.render()
    except Exception:  # noqa: BLE001 - the guard's error is the feature
        return True
    return False


# Behaviours of the installed transformers that some cases depend on
# ("#### NEEDS name" in the corpus): a case whose feature is missing is
# skipped and listed, not compared against an older transformers.
FEATURES = {"namespace-underscore-guard": namespace_underscore_guard}


def render_sits(driver, cases):
    batch = [{"template": c["template"], "variables_json": c["variables_json"],
              "now": c["now"]} for c in cases]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False,
                                     encoding="utf-8") as f:
        json.dump(batch, f)
        path = f.name
    with tempfile.NamedTemporaryFile("w", suffix=".jinja", delete=False) as f:
        f.write("")
        unused_template = f.name
    try:
        out = subprocess.run([driver, "--batch", unused_template, path],
                             capture_output=True, check=True)
    finally:
        os.unlink(path)
        os.unlink(unused_template)
    return json.loads(out.stdout.decode("utf-8"))


def dump_jinja2(corpus, out_path):
    import importlib.metadata as metadata
    outcomes = {}
    for case in parse_corpus(corpus):
        expected, error = render_jinja(case)
        outcomes[case["name"]] = ({"output": expected} if error is None else
                                  {"error": list(error)})
    versions = {p: metadata.version(p) for p in ("jinja2", "transformers")}
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump({"versions": versions, "outcomes": outcomes}, f, indent=1)
    return 0


def main():
    if sys.argv[1] == "--dump-jinja2":
        return dump_jinja2(sys.argv[2], sys.argv[3])
    driver, corpus = sys.argv[1], sys.argv[2]
    cases = parse_corpus(corpus)
    results = render_sits(driver, cases)
    assert len(results) == len(cases)
    outputs = errors = skipped = 0
    failures = []
    features = {}
    for case, got in zip(cases, results):
        name = case["name"]
        need = case.get("needs")
        if need:
            if need not in features:
                features[need] = FEATURES[need]()
            if not features[need]:
                skipped += 1
                print(f"skipped: {name}: the installed transformers lacks "
                      f"{need}")
                continue
        expected, error = render_jinja(case)
        if error is None:
            if got.get("output") == expected:
                outputs += 1
                continue
            failures.append(f"{name}: jinja2 rendered {expected!r}, sits "
                            f"{'failed: ' + got['error'] if 'error' in got else 'rendered ' + repr(got['output'])}")
            continue
        if "error" not in got:
            failures.append(f"{name}: jinja2 failed ({error[0]}: {error[1]}), "
                            f"sits rendered {got['output']!r}")
            continue
        if error[2] and error[1] not in got["error"]:
            failures.append(f"{name}: raise_exception message {error[1]!r} "
                            f"missing from sits' error {got['error']!r}")
            continue
        if got.get("code") != "template error":
            failures.append(f"{name}: sits failed with code {got.get('code')}")
            continue
        errors += 1
        print(f"both fail: {name}: jinja2 {error[0]}: {error[1]} | sits: "
              f"{got['error']}")
    for failure in failures:
        print("MISMATCH " + failure)
    print(f"{len(cases)} cases: {outputs} identical outputs, {errors} both "
          f"fail, {len(failures)} mismatches, {skipped} skipped")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
