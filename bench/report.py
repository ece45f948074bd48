#!/usr/bin/env python3
"""The table of bench/run.sh: sits-bench against the PyTorch references.

  report.py --out summary.md OUT_DIR

Reads OUT_DIR/sits-<shape>.json (sits-bench --json), torch-<shape>.json
(bench/llama_bench.py) and times-<shape>.json (run.sh), prints a markdown
table per shape and one summary line per shape (ours at batch 1 and a
32-token prompt against torch.compile, Hugging Face eager and the bandwidth
floor), and writes the same to --out. With int4-<shape>.json (sits-bench of
the engine with int4 weights) the table gains its ms/token and its ratio to
fp16, and an INT4 line gives the ratio at batch 1 and the shortest context
against the target (<= 0.45x).
"""

import argparse
import glob
import json
import os
import sys

DEFAULT_COPY_GBS = 4300.0  # KINDS.md: device-to-device copy on an H200


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def fmt(value, digits=3):
    return "-" if value is None else ("%.*f" % (digits, value))


def shape_report(shape, out_dir):
    ours = load(os.path.join(out_dir, "sits-%s.json" % shape)) or {}
    torch = load(os.path.join(out_dir, "torch-%s.json" % shape)) or {}
    times = load(os.path.join(out_dir, "times-%s.json" % shape)) or {}
    int4 = {(r["batch"], r["context"]): r for r in (load(os.path.join(
        out_dir, "int4-%s.json" % shape)) or {}).get("results", [])}
    copy_gbs = torch.get("copy_gb_per_s") or DEFAULT_COPY_GBS
    compiled = {}
    for row in torch.get("torch_compile", []):
        key = (row["batch"], row["context"])
        # The tight cache (gpt-fast's sizing) where both exist.
        if key not in compiled or row.get("label") == "tight cache":
            compiled[key] = row
    eager = {(r["batch"], r["context"]): r for r in torch.get("hf_generate", [])}
    lines = ["## %s" % shape, ""]
    phases = torch.get("phases", {})
    lines.append(
        "ONNX export %s s, sitsc compile %s s (concurrent with the PyTorch "
        "runs), engine load + 2 tokens with sits-run %s s, engine %s GB; "
        "device-to-device copy %s GB/s (%s)." % (
            phases.get("onnx_export_s", "-"), phases.get("sitsc_compile_s", "-"),
            times.get("load_and_first_tokens_s", "-"),
            fmt(times.get("engine_bytes", 0) / 1e9, 2)
            if times.get("engine_bytes") else "-",
            fmt(copy_gbs, 0),
            "measured" if torch.get("copy_gb_per_s") else "KINDS.md's figure"))
    lines.append("")
    header = ("| batch | context | sits ms/token | sits tokens/s | "
              "sits GB/s | floor ms | of floor | torch.compile ms/token | "
              "vs torch | HF eager ms/token | sits prefill tokens/s |")
    rule = "|---|---|---|---|---|---|---|---|---|---|---|"
    if int4:
        header += " int4 ms/token | int4 GB/s | int4 / fp16 |"
        rule += "---|---|---|"
    lines.append(header)
    lines.append(rule)
    int4_summary = None
    summary = None
    for row in ours.get("results", []):
        b, c = row["batch"], row["context"]
        ms = row["decode_ms_per_token"]
        floor = row["bytes_per_step"] / (copy_gbs * 1e9) * 1e3
        ref = compiled.get((b, c))
        ref_ms = ref["decode_ms_per_token"] if ref else None
        hf = eager.get((b, c))
        hf_ms = hf["decode_ms_per_token"] if hf else None
        text = "| %d | %d | %s | %s | %s | %s | %s | %s%s | %s | %s | %s |" % (
            b, c, fmt(ms), fmt(row["decode_tokens_per_s"], 0),
            fmt(row["achieved_gb_per_s"], 0), fmt(floor), fmt(floor / ms, 2),
            fmt(ref_ms),
            " (%s)" % ref.get("label") if ref else "",
            "%.2fx" % (ref_ms / ms) if ref_ms else "-", fmt(hf_ms, 2),
            fmt(row.get("prefill_tokens_per_s"), 0))
        q = int4.get((b, c))
        q_ms = q["decode_ms_per_token"] if q else None
        if int4:
            text += " %s | %s | %s |" % (
                fmt(q_ms), fmt(q["achieved_gb_per_s"], 0) if q else "-",
                "%.2fx" % (q_ms / ms) if q_ms else "-")
        lines.append(text)
        if b == 1 and c == min(r["context"] for r in ours["results"]):
            summary = (b, c, ms, floor, ref_ms, hf_ms)
            if q_ms:
                int4_summary = (b, c, ms, q_ms)
    ones = {r["context"]: r for r in ours.get("results", []) if r["batch"] == 1}
    eights = {r["context"]: r for r in ours.get("results", []) if r["batch"] == 8}
    lines.append("")
    for c in sorted(set(ones) & set(eights)):
        lines.append("batch 8 / batch 1 tokens/s at context %d: %.2fx" % (
            c, eights[c]["decode_tokens_per_s"] / ones[c]["decode_tokens_per_s"]))
    for error in torch.get("errors", []):
        lines.append("")
        lines.append("PyTorch error: " + error.strip().splitlines()[0])
    for note in torch.get("notes", []):
        lines.append("note: " + note)
    lines.append("")
    if summary:
        b, c, ms, floor, ref_ms, hf_ms = summary
        text = ("SUMMARY %s: sits %.3f ms/token (batch %d, %d-token prompt) | "
                "torch.compile %s | HF eager %s | bandwidth floor %.3f ms "
                "(sits at %.0f%% of it)" % (
                    shape, ms, b, c, fmt(ref_ms), fmt(hf_ms, 2), floor,
                    100 * floor / ms))
    else:
        text = "SUMMARY %s: no sits-bench results" % shape
    if int4_summary:
        b, c, ms, q_ms = int4_summary
        text += ("\nINT4 %s: int4 weights %.3f ms/token, fp16 %.3f (batch %d, "
                 "%d-token prompt): %.2fx of fp16 (target <= 0.45x: %s)" % (
                     shape, q_ms, ms, b, c, q_ms / ms,
                     "met" if q_ms / ms <= 0.45 else "NOT met"))
    elif int4 or os.path.exists(os.path.join(out_dir, "int4-%s.json" % shape)):
        text += "\nINT4 %s: no int4 result at batch 1" % shape
    return lines, text


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out_dir")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    shapes = sorted({os.path.basename(p)[len("torch-"):-len(".json")]
                     for p in glob.glob(os.path.join(args.out_dir,
                                                     "torch-*.json"))} |
                    {os.path.basename(p)[len("sits-"):-len(".json")]
                     for p in glob.glob(os.path.join(args.out_dir,
                                                     "sits-*.json"))})
    body, summaries = [], []
    for shape in shapes:
        lines, text = shape_report(shape, args.out_dir)
        body += lines
        summaries.append(text)
    text = "\n".join(body + summaries) + "\n"
    with open(args.out, "w") as f:
        f.write(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
