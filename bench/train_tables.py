#!/usr/bin/python3
"""Tables and plots of the training measurements (bench/train_measurements.sh) from their JSON reports.

Usage: /usr/bin/python3 bench/train_tables.py [results dir] [plot dir]
Prints the two markdown tables of docs/training.md; with gnuplot on PATH, writes finetune_ppl.png (held-out
ppl against steps per method, one line per eval length) and scratch_ppl.png (ppl against eval length per
position encoding) into the plot dir.
"""
import json
import os
import shutil
import subprocess
import sys

RESULTS = sys.argv[1] if len(sys.argv) > 1 else "bench/results/training"
PLOTS = sys.argv[2] if len(sys.argv) > 2 else "docs/images"
METHODS = ["linear", "ntk", "yarn", "dynamic"]
ENCODINGS = [("rope", "rope"), ("sinusoidal", "sinusoidal"), ("learned", "learned, 256 rows"),
             ("learned2048", "learned, 2048 rows (256 trained)"), ("none", "none")]


def load(name):
    path = os.path.join(RESULTS, name)
    return json.load(open(path)) if os.path.exists(path) else None


def cell(p):
    return "error (past the table)" if p.get("error") else f"{p['ppl']:.3f}"


def finetune_table():
    rows, lens = [], None
    for m in METHODS:
        # A run interrupted and resumed has its earlier points in a kept copy of the first report
        # (finetune_<m>.first<N>.json); the points of all parts are merged by (step, L).
        points = {}
        for name in sorted(os.listdir(RESULTS)) if os.path.isdir(RESULTS) else []:
            if name.startswith(f"finetune_{m}.") and name.endswith(".json"):
                for p in load(name)["held_out"]:
                    points[(p["step"], p["ctx"])] = p
        if not points:
            continue
        lens = sorted({L for _, L in points})
        for step in sorted({s for s, _ in points}):
            pts = {L: p for (s, L), p in points.items() if s == step}
            rows.append((m, step, [pts[L] for L in lens]))
    out = ["| method | steps | " + " | ".join(f"L={L}" for L in lens) + " |",
           "|---|---:|" + "---:|" * len(lens)]
    out += [f"| {m} | {s} | " + " | ".join(cell(p) for p in pts) + " |" for m, s, pts in rows]
    return "\n".join(out), rows, lens


def scratch_table():
    rows, lens = [], None
    for key, label in ENCODINGS:
        j = load(f"scratch_{key}.gguf.json")
        if not j:
            continue
        last = max(p["step"] for p in j["held_out"])
        pts = sorted((p for p in j["held_out"] if p["step"] == last), key=lambda p: p["ctx"])
        lens = [p["ctx"] for p in pts]
        rows.append((label, last, pts))
    out = ["| position encoding | steps | " + " | ".join(f"L={L}" for L in lens) + " |",
           "|---|---:|" + "---:|" * len(lens)]
    out += [f"| {label} | {s} | " + " | ".join(cell(p) for p in pts) + " |" for label, s, pts in rows]
    return "\n".join(out), rows, lens


def plot(script, data, png):
    gp = shutil.which("gnuplot")
    if not gp:
        print(f"(gnuplot not found: {png} not drawn)", file=sys.stderr)
        return
    os.makedirs(PLOTS, exist_ok=True)
    dat = png + ".dat"
    with open(dat, "w") as f:
        f.write(data)
    subprocess.run([gp], input=script.replace("DATA", dat).replace("PNG", png), text=True, check=True)
    os.remove(dat)


def main():
    ft, ft_rows, ft_lens = finetune_table()
    sc, sc_rows, sc_lens = scratch_table()
    print("Fine-tuning stories260K at L = 2048 (held-out perplexity):\n")
    print(ft)
    print("\nTrained from scratch at L = 256 (held-out perplexity):\n")
    print(sc)
    if ft_rows:
        blocks, plots = [], []
        idx = 0
        for m in METHODS:
            pts = [(s, p) for mm, s, p in ft_rows if mm == m]
            if not pts:
                continue
            blocks.append("\n".join(f"{s} " + " ".join(f"{q['ppl']:.6f}" for q in p) for s, p in pts))
            for k, L in enumerate(ft_lens):
                plots.append(f"'DATA' index {idx} using ($1 == 0 ? 1 : $1):{k + 2} with linespoints "
                             f"dt {k + 1} lc {idx + 1} title '{m} L={L}'")
            idx += 1
        plot("set terminal png size 900,560\nset output 'PNG'\nset logscale xy\n"
             "set xlabel 'fine-tuning steps at L = 2048 (0 drawn at 1)'\nset ylabel 'held-out perplexity'\n"
             "set key outside right\nplot " + ", ".join(plots) + "\n",
             "\n\n\n".join(blocks) + "\n", os.path.join(PLOTS, "finetune_ppl.png"))
    if sc_rows:
        blocks, plots = [], []
        for i, (label, _, pts) in enumerate(sc_rows):
            good = [p for p in pts if not p.get("error")]
            blocks.append("\n".join(f"{p['ctx']} {p['ppl']:.6f}" for p in good) or "256 NaN")
            plots.append(f"'DATA' index {i} using 1:2 with linespoints title '{label}'")
        plot("set terminal png size 900,560\nset output 'PNG'\nset logscale x 2\nset logscale y\n"
             "set xlabel 'eval length L (trained at 256)'\nset ylabel 'held-out perplexity'\n"
             "set key outside right\nplot " + ", ".join(plots) + "\n",
             "\n\n\n".join(blocks) + "\n", os.path.join(PLOTS, "scratch_ppl.png"))


if __name__ == "__main__":
    main()
