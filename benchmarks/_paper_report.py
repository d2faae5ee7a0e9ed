"""Markdown tables and PNG figures of ``bench_paper.py`` from its JSON (``--report-only`` reruns this alone)."""

import json
import os

import numpy as np

from _common import FIGURES_DIR

METHOD_ORDER = ("exact", "laplace_is", "ns", "ais", "bridge", "dynesty")
SPEEDUP_SIZES = (1000, 10_000, 100_000, 1_000_000)


def best_reference(refs):
    """``(name, result)`` of the most accurate reference present: exact, then Laplace-IS, then bridge."""
    for method in ("exact", "laplace_is", "bridge"):
        r = refs.get(method, {})
        if "log_evidence" in r:
            return method, r
    return None, None


def _cpu(r):
    return r.get("cpu_seconds", r.get("seconds", float("nan")))


def _cell(r):
    if r is None:
        return "-"
    if "log_evidence" not in r:
        return r.get("skipped", "not run")
    return f"{r['log_evidence']:.2f} ± {r['std']:.2f}"


def _sgais_at(entry, n):
    h = entry["sgais"]["history"]
    if n not in h["n"]:
        return None
    i = h["n"].index(n)
    return dict(log_evidence=h["log_evidence"][i], std=h["std"][i], cpu_seconds=h["cpu_seconds"][i],
                seconds=h["wall_seconds"][i], n_annealing_steps=h["n_annealing_steps"][i])


def evidence_tables(data):
    lines = []
    for name, entry in data.get("evidence", {}).items():
        lines += [f"\n### {name}: log Z ± reported error (CPU seconds) vs N\n",
                  "| N | SGAIS (cumulative CPU s) | " + " | ".join(METHOD_ORDER) + " | pairs outside max(3σ, 0.5) |",
                  "|---" * (len(METHOD_ORDER) + 3) + "|"]
        for n_str, refs in entry["references"].items():
            n = int(n_str)
            sg = _sgais_at(entry, n)
            cells = [f"{_cell(sg)} ({sg['cpu_seconds']:.2f})" if sg else "below one chunk"]
            for m in METHOD_ORDER:
                r = refs.get(m)
                cells.append("n/a" if r is None else (f"{_cell(r)} ({_cpu(r):.1f})" if "log_evidence" in r
                                                      else _cell(r)))
            bad = [f"{p['a']}–{p['b']} {p['difference']:+.2f} (tol {p['tolerance']:.2f})"
                   for p in entry.get("agreement", {}).get(n_str, []) if not p["agree"]]
            lines.append(f"| {n:.0e} | " + " | ".join(cells) + f" | {'; '.join(bad) or 'none'} |")
    return lines


def predicted_cpu(entry, method, n):
    """CPU seconds of ``method`` at ``n`` scaled linearly in N from its largest measured run (or None)."""
    runs = [(int(k), refs[method]) for k, refs in entry["references"].items()
            if "log_evidence" in refs.get(method, {}) and int(k) < n]
    if not runs:
        return None
    k, r = max(runs, key=lambda kr: kr[0])
    return _cpu(r) * n / k


def speedup_table(data):
    lines = ["\n### Speed-up: SGAIS cumulative streaming CPU time to N vs one full-data reference run at N\n",
             "A reference over the budget shows its CPU time scaled linearly in N from its largest measured run "
             "(a prediction, not a measurement; the cost per likelihood call is linear in N and the number of "
             "calls grows slowly with N, so it is if anything an underestimate).\n",
             "| model | N | SGAIS log Z ± err | SGAIS − ref (ref) | SGAIS CPU s | NS log Z ± err | NS CPU s | NS/SGAIS "
             "| AIS log Z ± err | AIS CPU s | AIS/SGAIS | dynesty log Z ± err | dynesty CPU s | dynesty/SGAIS |",
             "|---" * 14 + "|"]
    for name, entry in data.get("evidence", {}).items():
        for n in SPEEDUP_SIZES:
            sg = _sgais_at(entry, n)
            refs = entry["references"].get(str(n), {})
            if sg is None and not refs:
                continue
            ref_name, ref = best_reference(refs)
            if sg is None:
                row = [name, f"{n:.0e}", "not streamed", "-", "-"]
            else:
                diff = f"{sg['log_evidence'] - ref['log_evidence']:+.2f} ({ref_name})" if ref else "no reference"
                row = [name, f"{n:.0e}", _cell(sg), diff, f"{sg['cpu_seconds']:.2f}"]
            for m in ("ns", "ais", "dynesty"):
                r = refs.get(m)
                if r is None or "log_evidence" not in r:
                    predicted = predicted_cpu(entry, m, n)
                    if predicted is not None and sg is not None and "budget" in (r or {}).get("skipped", ""):
                        row += ["not run (> budget)", f"~{predicted:.0f} (predicted)",
                                f"~{predicted / sg['cpu_seconds']:.0f}× (predicted)"]
                    else:
                        row += [(r or {}).get("skipped", "not run"), "-", "-"]
                    continue
                factor = f"{_cpu(r) / sg['cpu_seconds']:.1f}×" if sg else "-"
                row += [_cell(r), f"{_cpu(r):.1f}", factor]
            lines.append("| " + " | ".join(row) + " |")
    return lines


def comparison_table(data, sizes=(1000, 10_000)):
    """Issue 4: ours vs dynesty vs the references with calls and seconds; the 1/5-of-dynesty check."""
    lines = ["\n### Reference backends vs dynesty (issue 4)\n",
             "| model | N | method | log Z | reported err | likelihood calls | wall s | CPU s | settings |",
             "|---|---|---|---|---|---|---|---|---|"]
    checks = []
    for name, entry in data.get("evidence", {}).items():
        for n in sizes:
            refs = entry["references"].get(str(n))
            if not refs:
                continue
            for m in METHOD_ORDER:
                r = refs.get(m)
                if r is None:
                    continue
                if "log_evidence" not in r:
                    lines.append(f"| {name} | {n:.0e} | {m} | {r.get('skipped', 'not run')} | | | | | |")
                    continue
                extra = "cached " + r.get("date", "") if r.get("cached") else str(r.get("settings", ""))
                lines.append(f"| {name} | {n:.0e} | {m} | {r['log_evidence']:.3f} | {r['std']:.3f} | {r['calls']:.3g} | "
                             f"{r['seconds']:.1f} | {_cpu(r):.1f} | {extra} |")
            dyn = refs.get("dynesty", {})
            if name != "linear" and "log_evidence" in dyn:
                for m in ("ns", "ais", "bridge"):
                    if "log_evidence" in refs.get(m, {}):
                        ratio = _cpu(refs[m]) / _cpu(dyn)
                        checks.append(f"- {name} N={n:.0e}: {m} CPU / dynesty CPU = {ratio:.3f} "
                                      f"({'meets' if ratio <= 0.2 else 'misses'} the ≤ 1/5 target)")
    return lines + ["\nWall-time target of issue 4 (CPU seconds; dynesty's from its cached run):\n"] + (checks or ["- no dynesty run"])


def shift_lines(data):
    s = data.get("shift")
    if not s:
        return []
    lines = [f"\n### Distribution shift (paper Fig. 5), N={s['n']}, true change points {s['true_change_points']}\n",
             "| order | CPU s | detected (selector) | detected per candidate | final log Z / N | final P(K) |",
             "|---|---|---|---|---|---|"]
    for order, run in s["runs"].items():
        per = "; ".join(f"{c}: {v['detected']}" for c, v in run["candidates"].items())
        final = ", ".join(f"{c}: {v['log_evidence'][-1] / s['n']:.4f}" for c, v in run["candidates"].items())
        probs = ", ".join(f"{p:.3g}" for p in run["model_probabilities"])
        lines.append(f"| {order} | {run['cpu_seconds']:.1f} | {run['detected']} | {per} | {final} | {probs} |")
    return lines


def sensitivity_lines(data):
    lines = []
    for name, res in data.get("sensitivity", {}).items():
        ref = res["reference"]
        lines += [f"\n### Sensitivity on {name}, N={res['n']:.0e} (reference: {ref['method']} "
                  f"{ref['log_evidence']:.2f} ± {ref['std']:.2f}); defaults {res['defaults']}\n",
                  "| parameter | value | seeds | mean error | max abs error | mean reported std | CPU s | annealing steps / chunk |",
                  "|---|---|---|---|---|---|---|---|"]
        groups = {}
        for row in res["rows"]:
            groups.setdefault((row["param"], row["value"]), []).append(row)
        for (param, value), rows in groups.items():
            err = np.array([r["error"] for r in rows])
            mark = " (default)" if rows[0]["is_default"] else ""
            lines.append(f"| {param} | {value}{mark} | {len(rows)} | {err.mean():+.3f} | {np.abs(err).max():.3f} | "
                         f"{np.mean([r['std'] for r in rows]):.3f} | {np.mean([r['cpu_seconds'] for r in rows]):.2f} | "
                         f"{np.mean([r['mean_annealing_steps'] for r in rows]):.1f} |")
    return lines


# -- figures -------------------------------------------------------------------------------
def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure_evidence(name, entry, path):
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), constrained_layout=True)
    h = entry["sgais"]["history"]
    n = np.array(h["n"], dtype=float)
    z, s = np.array(h["log_evidence"]), np.array(h["std"])
    axes[0].plot(n, z / n, label="SGAIS (one stream)", color="k")
    axes[2].plot(n, h["cpu_seconds"], label="SGAIS cumulative", color="k")
    markers = dict(exact="*", laplace_is="P", ns="o", ais="s", bridge="^", dynesty="D")
    sizes = sorted(int(k) for k in entry["references"])
    for m in METHOD_ORDER:
        pts = [(k, entry["references"][str(k)].get(m, {})) for k in sizes]
        pts = [(k, r) for k, r in pts if "log_evidence" in r]
        if not pts:
            continue
        ks = np.array([k for k, _ in pts], dtype=float)
        zs = np.array([r["log_evidence"] for _, r in pts])
        axes[0].plot(ks, zs / ks, markers[m], label=m, alpha=0.8)
        if m != "exact":
            axes[2].plot(ks, [_cpu(r) for _, r in pts], markers[m] + "-", label=m, alpha=0.8)
    # deviation from the best reference at the reference sizes
    for m in ("sgais",) + METHOD_ORDER:
        xs, ds, es = [], [], []
        for k in sizes:
            refs = entry["references"][str(k)]
            ref_name, ref = best_reference(refs)
            r = _sgais_at(entry, k) if m == "sgais" else refs.get(m, {})
            if ref is None or r is None or "log_evidence" not in r or m == ref_name:
                continue
            xs.append(k)
            ds.append(r["log_evidence"] - ref["log_evidence"])
            es.append(np.hypot(r["std"], ref["std"]))
        if xs:
            axes[1].errorbar(xs, ds, yerr=es, fmt=markers.get(m, "x") + ("-" if m == "sgais" else ""),
                             label=m, capsize=3, color="k" if m == "sgais" else None, alpha=0.8)
    axes[1].axhline(0, color="grey", lw=0.8)
    axes[1].set_yscale("symlog", linthresh=1.0)
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("N (samples)")
        ax.legend(fontsize=7)
    axes[2].set_yscale("log")
    axes[0].set_ylabel("log Z / N")
    axes[1].set_ylabel("log Z − reference (exact / Laplace-IS / bridge)")
    axes[2].set_ylabel("CPU seconds")
    axes[0].set_title(f"{name}: log evidence per datum")
    axes[1].set_title("deviation from the reference (± combined error)")
    axes[2].set_title("run time (SGAIS cumulative vs one run at N)")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def figure_shift(s, path):
    plt = _plt()
    fig, axes = plt.subplots(2, 1, figsize=(8, 7), sharex=True, constrained_layout=True)
    for k, cand in enumerate(s["runs"]["in_order"]["candidates"]):
        for order, style in (("in_order", "-"), ("shuffled", "--")):
            run = s["runs"].get(order)
            if run is None:
                continue
            n = np.array(run["n"], dtype=float)
            c = run["candidates"][cand]
            axes[0].plot(n, np.array(c["log_evidence"]) / n, style, color=f"C{k}", label=f"{cand} {order}")
            if order == "in_order":
                axes[1].plot(n, c["n_annealing_steps"], color=f"C{k}", label=cand)
    for ax in axes:
        for c in s["true_change_points"]:
            ax.axvline(c, color="grey", ls=":")
        for c in s["runs"]["in_order"]["detected"]:
            ax.axvline(c, color="red", ls="--", alpha=0.6)
        ax.set_xscale("log")
        ax.legend(fontsize=7, ncol=2)
    axes[0].set_ylabel("log evidence per datum")
    axes[1].set_ylabel("annealing steps per chunk (in order)")
    axes[1].set_xlabel("samples seen")
    axes[0].set_title("distribution shift: dotted true, dashed red detected (in order)")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def figure_sensitivity(name, res, path):
    plt = _plt()
    params = list(dict.fromkeys(r["param"] for r in res["rows"]))
    fig, axes = plt.subplots(3, len(params), figsize=(3.2 * len(params), 8), constrained_layout=True, squeeze=False)
    for j, p in enumerate(params):
        rows = [r for r in res["rows"] if r["param"] == p]
        values = sorted(set(r["value"] for r in rows))
        for i, key in enumerate(("error", "cpu_seconds", "mean_annealing_steps")):
            mean = [np.mean([r[key] for r in rows if r["value"] == v]) for v in values]
            axes[i, j].plot(values, mean, "o-")
            if key == "error":
                std = [np.mean([r["std"] for r in rows if r["value"] == v]) for v in values]
                axes[i, j].errorbar(values, mean, yerr=std, fmt="none", capsize=3)
                axes[i, j].axhline(0, color="grey", lw=0.8)
            axes[i, j].axvline(res["defaults"][p], color="grey", ls=":")
            axes[i, j].set_xscale("log")
        axes[2, j].set_xlabel(p)
    axes[0, 0].set_ylabel("log Z error (nats)")
    axes[1, 0].set_ylabel("CPU seconds")
    axes[2, 0].set_ylabel("annealing steps / chunk")
    fig.suptitle(f"sensitivity on {name}, N={res['n']:.0e} (dotted: default)")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(path):
    """Write ``<stem>.md`` next to the JSON and the figures in ``results/figures/``; return the markdown."""
    with open(path) as fh:
        data = json.load(fh)
    stem = os.path.splitext(os.path.basename(path))[0]
    meta, cfg = data.get("metadata", {}), data.get("settings", {})
    lines = [f"# Paper reproduction ({'quick' if cfg.get('quick') else 'full'} mode)\n",
             f"Commit `{meta.get('git_commit')}`, {meta.get('date')}, command `{meta.get('command')}`; "
             f"{meta.get('cpu_count')} cores, load average at start {meta.get('load_average_start')}, "
             f"per-reference CPU budget {cfg.get('budget')} s. Times are process CPU seconds (the machine is shared; "
             "wall seconds are in the JSON); single-threaded BLAS. NS uses 100 live points, AIS and bridge their "
             "defaults, dynesty its defaults (500 live points)."]
    lines += evidence_tables(data) + speedup_table(data) + comparison_table(data) + shift_lines(data) + \
        sensitivity_lines(data)
    figures = []
    try:
        _plt()
    except ImportError:
        lines.append("\n(matplotlib not installed: no figures)")
    else:
        os.makedirs(FIGURES_DIR, exist_ok=True)
        for name, entry in data.get("evidence", {}).items():
            figures.append(os.path.join(FIGURES_DIR, f"{stem}_evidence_{name}.png"))
            figure_evidence(name, entry, figures[-1])
        if data.get("shift"):
            figures.append(os.path.join(FIGURES_DIR, f"{stem}_shift.png"))
            figure_shift(data["shift"], figures[-1])
        for name, res in data.get("sensitivity", {}).items():
            figures.append(os.path.join(FIGURES_DIR, f"{stem}_sensitivity_{name}.png"))
            figure_sensitivity(name, res, figures[-1])
    lines += ["\n### Figures\n"] + [f"- `{os.path.relpath(f, os.path.dirname(path))}`" for f in figures]
    text = "\n".join(lines) + "\n"
    md = os.path.join(os.path.dirname(path), stem + ".md")
    with open(md, "w") as fh:
        fh.write(text)
    print(text)
    print(f"wrote {md}")
    return text
