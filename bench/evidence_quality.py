"""The data-quality guard's evidence for the lead's half: HateCheck's dev suite and a sample of
Davidson et al. (2017), imported into one task with the desk's own import, then `dynadesk quality`.

    python -m bench.evidence_quality [--work DIR] [--davidson-rows 3000] [--no-embeddings]

The bundled default model is made round 1's target first, so that HateCheck's cases go in as round
1's examples written against it (`dynadesk import --format hatecheck --round 1`) and the embedding
spread is measured in its space; the Davidson sample (seeded) goes into the same round through the DynaHate
importer (`--format dynahate`), written as that format's CSV under --work (class 0 is hate, offensive
and neither are not hate). Reads /work/shared/data; writes only
under --work. Prints the artifact table and diversity figures, and checks that identity and negation
tokens lead the artifact list.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import random
import sys
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from tests.conftest import SHARED_DATA  # noqa: E402

HATECHECK = SHARED_DATA / "hatecheck" / "test_suite_cases_dev.csv"
DAVIDSON = SHARED_DATA / "davidson2017" / "labeled_data.csv"
DYNAHATE_COLUMNS = ["acl.id", "text", "label", "type", "target", "level", "split", "round.base", "annotator", "round",
                    "acl.id.matched"]
# HateCheck's identity words (its [IDENTITY] placeholders' fillers) and negations.
IDENTITY = {"women", "woman", "trans", "gay", "black", "disabled", "muslims", "muslim", "immigrants", "immigrant",
            "people", "refugees", "jews", "jewish"}
NEGATION = {"not", "no", "never", "don't", "isn't", "aren't", "nothing", "n't", "nobody", "none"}


def cli(data_dir: Path, *args: str) -> tuple[int, str]:
    from app.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main(["--data-dir", str(data_dir), *args])
        except SystemExit as exc:
            code = int(exc.code or 0)
    if code:
        print(err.getvalue(), file=sys.stderr)
    return code, out.getvalue()


def davidson_sample(target: Path, rows: int, seed: int = 21, round_number: int = 1) -> Path:
    with open(DAVIDSON, newline="", encoding="utf-8") as handle:
        records = list(csv.DictReader(handle))
    chosen = random.Random(seed).sample(records, min(rows, len(records)))
    with open(target, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, DYNAHATE_COLUMNS)
        writer.writeheader()
        for record in chosen:
            writer.writerow({"acl.id": f"davidson-{record['']}", "text": record["tweet"],
                             "label": "hate" if record["class"] == "0" else "nothate", "type": "", "target": "",
                             "level": "original", "split": "train", "round.base": str(round_number),
                             "annotator": "davidson", "round": str(round_number), "acl.id.matched": ""})
    return target




def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--davidson-rows", type=int, default=3000)
    parser.add_argument("--no-embeddings", action="store_true")
    options = parser.parse_args(argv)
    work = options.work or Path(tempfile.mkdtemp(prefix="dynadesk-evidence-quality-"))
    work.mkdir(parents=True, exist_ok=True)
    data_dir = work / "desk"
    sample = davidson_sample(work / "davidson-sample.csv", options.davidson_rows, round_number=1)
    if not options.no_embeddings:
        from app.core.desk import Desk
        from app.core.services.target_models import ensure_default_model

        with Desk(data_dir) as desk:
            record = ensure_default_model(desk)
            desk.rounds.adopt_first_models("hate_speech", [record.id])
            print(f"Round 1's target: {record.name}\n")
    for args in (["import", "--format", "hatecheck", "--task", "hate_speech", "--round", "1", str(HATECHECK)],
                 ["import", "--format", "dynahate", "--task", "hate_speech", str(sample)]):
        code, out = cli(data_dir, *args)
        print(f"$ dynadesk {' '.join(args)}\n{out.strip()}\n")
        if code:
            return code
    extra = ["--no-embeddings"] if options.no_embeddings else []
    code, text = cli(data_dir, "quality", "--task", "hate_speech", "--top", "20", "--by", "annotator", *extra)
    print(f"$ dynadesk quality --task hate_speech --top 20 --by annotator\n{text}")
    code, raw = cli(data_dir, "quality", "--task", "hate_speech", "--round", "1", "--top", "20", "--json",
                    "--no-embeddings")
    document = json.loads(raw)
    rows = document["rounds"][0]["artifacts"]["rows"]
    top = [r["term"] for r in rows[:20]]
    words = {w for term in top for w in term.split()}
    biggest = sorted((c["size"] for c in document["clusters"]), reverse=True)
    print(f"Round 1: {len(document['clusters'])} near-duplicate clusters, the largest "
          f"{biggest[:8]}; {sum(biggest):,} of {document['rounds'][0]['examples']:,} examples are in one")
    print(f"Top 20 artifact terms of round 1: {top}")
    print(f"identity words among them: {sorted(words & IDENTITY)}; negations: {sorted(words & NEGATION)}")
    return 0 if words & IDENTITY and words & NEGATION else 1


if __name__ == "__main__":
    sys.exit(main())
