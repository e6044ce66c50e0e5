"""A team's data written by the PREVIOUS release: run inside it (``PreviousRelease.script``), never imported here.

Given a running server of that release (its URL and database URL) and a folder, it adds the team's accounts,
then three desks write, import, validate, review, grow adaptive-suite variants, set task settings and sync
through that server with the release's own CLI and Desk API, until nothing waits. The import files are made
here, small. It prints, as JSON: the accounts, the desks' folders, every desk's ``stats`` output in every
grouping and the server's team stats, all as that release shows them.

Usage: python -c CODE '{"server": URL, "db": DB_URL, "folder": PATH}'
"""

import csv
import json
import sys
import uuid
from pathlib import Path

import httpx
from click.testing import CliRunner

from app.cli import cli
from app.core.desk import Desk
from app.core.domain import ModelOutput, Span
from app.core.io.exporters import export
from app.core.io.importers import import_file
from app.core.services.lead import REVISION
from app.core.task_settings import TaskSettings
from app.core.tasks.content import Content
from sync.server import store
from sync.server.db import ServerDatabase

HATE = "hate_speech"
MODEL_SHA = "ab" * 32
LABELS = {"0": "not hate", "1": "hate"}


def run(folder: Path, *args: str, input: str | None = None) -> str:
    result = CliRunner().invoke(cli, ["--data-dir", str(folder), *args], input=input)
    if result.exit_code != 0:
        raise SystemExit(f"dynadesk {' '.join(args)} exited {result.exit_code}: {result.output}\n{result.exception!r}")
    return result.output


def hate(text: str, label: str = "hate") -> Content:
    meta = {"hate_type": "derogation", "target_groups": ["women"]} if label == "hate" else {}
    return Content({"text": text}, label, meta={**meta, "label_explanation": "because"})


def said(model, label: str) -> list[ModelOutput]:
    p = 0.9 if label == "hate" else 0.1
    return [ModelOutput(model.id, model.sha256, label, {"hate": p, "not hate": 1 - p}, 4.2)]


def team_desk(folder: Path, account: dict, server: str) -> None:
    with Desk(folder) as desk:
        desk.people.create(account["name"], account["role"], person_id=uuid.UUID(account["id"]))
        desk.switch_person(uuid.UUID(account["id"]))
    run(folder, "sync", "configure", "--url", server, "--token-stdin", input=account["token"] + "\n")


def hate_model(desk: Desk):
    return next(m for m in desk.models.all() if m.sha256 == MODEL_SHA)


def write_files(folder: Path) -> dict[str, Path]:
    """One small file per CSV import format, as each data set's own columns."""
    files = {"hatecheck": folder / "hatecheck.csv", "dynahate": folder / "dynahate.csv", "anli": folder / "anli.csv"}
    with open(files["hatecheck"], "w", newline="", encoding="utf-8") as handle:
        rows = csv.writer(handle)
        rows.writerow(["", "functionality", "case_id", "test_case", "label_gold", "target_ident", "direction",
                       "focus_words", "focus_lemma", "ref_case_id", "ref_templ_id", "templ_id", "case_templ"])
        for i, (who, gold) in enumerate([("women", "hateful"), ("immigrants", "hateful"), ("women", "non-hateful"),
                                         ("gay people", "hateful")]):
            verb = "hate" if gold == "hateful" else "love"
            rows.writerow([i, f"derog_neg_emote_{gold[0]}", 100 + i, f"I {verb} {who}.", gold, who, "general",
                           verb, verb, "", "", 1 + i // 2, f"I {verb} [IDENTITY_P]."])
    with open(files["dynahate"], "w", newline="", encoding="utf-8") as handle:
        rows = csv.writer(handle)
        rows.writerow(["acl.id", "X1", "text", "label", "type", "target", "level", "split", "round.base", "annotator",
                       "round", "acl.id.matched"])
        rows.writerow(["acl901", 1, "People from that town are all parasites", "hate", "dehumanization", "immig",
                       "original", "train", 1, "GNZ1", 1, "acl902"])
        rows.writerow(["acl902", 2, "People from that town are all hard workers", "nothate", "none", "none",
                       "perturbation", "train", 1, "GNZ1", 1, "acl901"])
        rows.writerow(["acl903", 3, "Those women should never vote", "hate", "derogation", "wom", "original", "test",
                       2, "GNZ2", 2, ""])
    with open(files["anli"], "w", newline="", encoding="utf-8") as handle:
        rows = csv.writer(handle)
        rows.writerow(["context", "statement", "reason", "adversary_pred", "gold_label", "uid"])
        rows.writerow(["The bridge opened in 1932.", "The bridge is older than 1950.", "1932 is before 1950.",
                       "n", "e", "a1b2c3d4-0000-4000-8000-000000000001"])
        rows.writerow(["Mara sang at the festival.", "Mara never sang.", "She sang.", "e", "c",
                       "a1b2c3d4-0000-4000-8000-000000000002"])
    return files


def jsonl_file(folder: Path) -> Path:
    """What another desk exports with `dynadesk export --format jsonl`: one example by its own author."""
    path = folder / "elsewhere.jsonl"
    with Desk(folder / "elsewhere") as other:
        writer = other.people.create("Eli Elsewhere", "annotator")
        model = other.models.register("elsewhere model", "hf-torch", "12" * 32, task_id=other.tasks.task(HATE).id,
                                      label_map=LABELS)
        other.tasks.get_or_create_round(HATE, 3)
        other.examples.create(writer.id, HATE, hate("written elsewhere, arriving as JSONL"), said(model, "not hate"),
                              round_number=3)
        export(other, path, "jsonl", keep_identities=True)
    return path


def owner_writes(folder: Path, owner: dict) -> dict:
    """Every kind the owner's desk holds before the first sync; the ids the later steps need."""
    files = write_files(folder.parent)
    with Desk(folder) as desk:
        me = uuid.UUID(owner["id"])
        task = desk.tasks.task(HATE)
        model = desk.models.register("test hate model", "hf-torch", MODEL_SHA, task_id=task.id, label_map=LABELS)
        for n in range(10, 16):
            desk.tasks.get_or_create_round(HATE, n)

        def write(text, label="hate", answer="not hate", round_number=10, **kwargs):
            return desk.examples.create(me, HATE, hate(text, label), said(model, answer), round_number=round_number,
                                        **kwargs)

        fooling = write("written on the desk, fooling")
        write("written on the desk, not fooling", answer="hate")
        original = write("they are all vermin", round_number=11)
        write("they are all lovely", label="not hate", round_number=11, perturbation_of=original.id)
        returned = write("returned by the lead", round_number=12)
        gone = write("retracted by its author", round_number=13)
        desk.examples.retract(gone.id, me)
        import_file(desk, files["hatecheck"], "hatecheck", round_number=15, group_column="templ_id")
        import_file(desk, files["hatecheck"], "hatecheck")  # a suite of test cases
        import_file(desk, files["dynahate"], "dynahate")
        import_file(desk, files["anli"], "anli", round_number=2)
        import_file(desk, jsonl_file(folder.parent), "jsonl")
        nli = desk.models.register("nli model", "hf-torch", "cd" * 32, task_id=desk.tasks.task("nli").id,
                                   label_map={"0": "entailment", "1": "neutral", "2": "contradiction"})
        desk.examples.create(me, "nli", Content({"context": "A man plays a guitar.", "hypothesis": "Nobody plays."},
                                                "contradiction", meta={"label_explanation": "someone plays"}),
                             [ModelOutput(nli.id, nli.sha256, "neutral",
                                          {"entailment": 0.2, "neutral": 0.5, "contradiction": 0.3}, 1.0)])
        qa = desk.models.register("qa model", "hf-torch", "ef" * 32, task_id=desk.tasks.task("extractive_qa").id)
        context = "The bridge was finished in 1932 by a crew of four hundred."
        at = context.index("four hundred")
        desk.examples.create(me, "extractive_qa",
                             Content({"context": context, "question": "How many built the bridge?"}, None,
                                     Span(at, at + 12, "four hundred"), meta={}),
                             [ModelOutput(qa.id, qa.sha256, "The", {}, 1.0, answer=Span(0, 3, "The"))])
        for code, record, numbers in ((HATE, model, (10, 11, 12, 13, 14, 15)), ("nli", nli, (1, 2)),
                                      ("extractive_qa", qa, (1,))):
            for n in numbers:
                desk.rounds.set_models(desk.tasks.get_or_create_round(code, n).id, me, [record.id])
        desk.tasks.set_settings(HATE, TaskSettings(agreement_threshold=2, blur_words=("vermin",)), me)
        return {"fooling": str(fooling.id), "returned": str(returned.id), "original": str(original.id)}


def publish_model_with_files(server: str, owner: dict) -> dict[str, str]:
    """A model published with its files (uploaded first, as a desk does): blobs on the server. Their sha256s."""
    import hashlib

    from app.core.io.records import dump_model
    from sync.protocol import manifest_sha256

    auth = {"Authorization": f"Bearer {owner['token']}"}
    files = {"model/weights.bin": bytes(range(256)) * 700, "tokenizer/vocab.txt": "\n".join(
        ["[PAD]", "[UNK]", "they", "are", "all"]).encode()}
    listed = []
    for name, content in files.items():
        sha = hashlib.sha256(content).hexdigest()
        response = httpx.put(f"{server}/v1/blobs/{sha}", content=content, headers=auth, timeout=60)
        response.raise_for_status()
        listed.append({"name": name, "sha256": sha, "size": len(content)})
    with Desk(Path(owner["folder"])) as desk:  # registered on the owner's desk, as a model with files is
        model = desk.models.register("published with files", "hf-torch",
                                     manifest_sha256((f["name"], f["sha256"]) for f in listed),
                                     task_id=desk.tasks.task(HATE).id, label_map=LABELS)
        record = {**dump_model(model, HATE), "files": listed}
    response = httpx.post(f"{server}/v1/publish", json={"records": [record]}, headers=auth, timeout=60)
    response.raise_for_status()
    assert {r["status"] for r in response.json()["results"]} == {"stored"}, response.text
    return {f["name"]: f["sha256"] for f in listed}


def main() -> None:
    args = json.loads(sys.argv[1])
    folder, server = Path(args["folder"]), args["server"]
    database = ServerDatabase(args["db"])
    accounts = {}
    for key, name, role in (("owner", "Olga Owner", "owner"), ("lead", "Lee Lead", "lead"),
                            ("ann", "Ann Annotator", "annotator")):
        person, token = store.add_person(database, name, role, "A")
        accounts[key] = {"id": str(person.id), "name": name, "role": role, "token": token}
    database.close()
    desks = {key: folder / key for key in accounts}
    for key, account in accounts.items():
        team_desk(desks[key], account, server)

    ids = owner_writes(desks["owner"], accounts["owner"])
    blobs = publish_model_with_files(server, {**accounts["owner"], "folder": str(desks["owner"])})
    for code in (HATE, "nli", "extractive_qa"):  # the docs' order: publish, share the imports, sync
        run(desks["owner"], "sync", "publish", code)
    run(desks["owner"], "sync", "share-imported")
    run(desks["owner"], "sync", "--now")

    # Ann pulls, writes in round 14 (the owner's desk pulls it) and validates the owner's fooling example
    run(desks["ann"], "sync", "--now")
    with Desk(desks["ann"]) as desk:
        me = uuid.UUID(accounts["ann"]["id"])
        desk.tasks.get_or_create_round(HATE, 14)
        desk.examples.create(me, HATE, hate("written on another desk"), said(hate_model(desk), "not hate"),
                             round_number=14)
        desk.validation.validate(uuid.UUID(ids["fooling"]), me, "correct")
    run(desks["ann"], "sync", "--now")

    # the lead returns one, accepts and adjudicates others, and grows adaptive-suite variants of a seed
    run(desks["lead"], "sync", "--now")
    with Desk(desks["lead"]) as desk:
        me = uuid.UUID(accounts["lead"]["id"])
        desk.lead.return_examples(me, [uuid.UUID(ids["returned"])], "say who is meant")
        seed = uuid.UUID(ids["original"])
        desk.lead.adjudicate(seed, me, "correct")
        desk.lead.adjudicate(uuid.UUID(ids["fooling"]), me, "correct")
        desk.lead.accept_work(me, uuid.UUID(accounts["owner"]["id"]), example_ids=[uuid.UUID(ids["fooling"])],
                              comment="clear")
        model = hate_model(desk)
        origin = {"kind": "variant", "seed_id": str(seed), "rule": "swap group", "edit_type": "group swap",
                  "generated_by": str(me), "seed_text": "they are all vermin", "note": ""}
        desk.adaptive_suite.store_variants(HATE, me, [(hate("they are all vermin, every one"), said(model, "not hate"),
                                                       {**origin, "rule": "intensify"}),
                                                      (hate("those people are all vermin"), said(model, "hate"), origin)])
    run(desks["lead"], "sync", "--now")

    # the owner pulls the return and revises the example
    run(desks["owner"], "sync", "--now")
    with Desk(desks["owner"]) as desk:
        desk.examples.create(uuid.UUID(accounts["owner"]["id"]), HATE, hate("returned by the lead, revised"),
                             said(hate_model(desk), "not hate"), round_number=12,
                             origin={"kind": REVISION, "of": ids["returned"]})
    for key in ("owner", "ann", "lead", "owner", "ann"):  # until every desk has everything
        run(desks[key], "sync", "--now")

    stats = {key: {"text": run(desks[key], "stats"), "json": run(desks[key], "stats", "--json")} for key in desks}
    waiting = {key: run(desks[key], "sync") for key in desks}
    team = {}
    for by in ("round", "annotator"):
        response = httpx.get(f"{server}/v1/team/stats", params={"by": by}, timeout=60,
                             headers={"Authorization": f"Bearer {accounts['lead']['token']}"})
        response.raise_for_status()
        team[by] = response.json()
    print(json.dumps({"accounts": accounts, "desks": {k: str(v) for k, v in desks.items()}, "stats": stats,
                      "team_stats": team, "sync_status": waiting, "blobs": blobs}))


main()
