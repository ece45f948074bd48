"""Checks sits' chat templates against results saved from transformers.

goldens.json holds what transformers' apply_chat_template rendered (or the
error it raised) for the templates in templates/ and the conversations of
compare_transformers.py, which writes it (--write-goldens). This check needs
only the Python standard library, so it runs where transformers is not
installed.

usage: check_goldens.py DRIVER TEMPLATES_DIR GOLDENS
"""

import json
import os
import subprocess
import sys
import tempfile


def main():
    driver, templates_dir, goldens_path = sys.argv[1:4]
    with open(goldens_path, encoding="utf-8") as f:
        goldens = json.load(f)
    by_template = {}
    for case in goldens["cases"]:
        by_template.setdefault(case["template"], []).append(case)
    failures = []
    identical = errors = 0
    for template, cases in sorted(by_template.items()):
        batch = []
        for case in cases:
            variables = dict(goldens["conversations"][case["conversation"]])
            variables.update(case["extra"])
            batch.append({"variables": variables, "now": goldens["now"]})
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False,
                                         encoding="utf-8") as f:
            json.dump(batch, f, ensure_ascii=False)
            path = f.name
        out = subprocess.run(
            [driver, "--batch", os.path.join(templates_dir, template), path],
            capture_output=True, check=True)
        os.unlink(path)
        for case, got in zip(cases, json.loads(out.stdout.decode("utf-8"))):
            name = f"{template}/{case['conversation']}/" \
                   f"gen={case['extra'].get('add_generation_prompt')}"
            if "output" in case:
                if got.get("output") == case["output"]:
                    identical += 1
                else:
                    failures.append(f"{name}: expected {case['output']!r}, "
                                    f"got {got!r}")
            elif "error" not in got:
                failures.append(f"{name}: expected an error, got "
                                f"{got['output']!r}")
            elif case["raise_exception"] and case["error"] not in got["error"]:
                failures.append(f"{name}: error {got['error']!r} lacks "
                                f"{case['error']!r}")
            else:
                errors += 1
    for failure in failures:
        print("MISMATCH " + failure)
    print(f"{identical + errors + len(failures)} renderings: {identical} "
          f"identical, {errors} both fail, {len(failures)} mismatches")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
