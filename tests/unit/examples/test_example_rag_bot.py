"""The shipped RAG example: its build, and the retrieval and grounding each branch was made for."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.fake_rag_judge import rag_reply
from tests.unit.examples.example_support import load_module
from worker.evals.config.dataset import parse_dataset
from worker.evals.llm_types import Endpoint
from worker.evals.score.judges import judge_messages, judge_spec
from worker.evals.score.retrieval import recall_at_k
from worker.evals.types import AssertionSpec

pytestmark = pytest.mark.slow  # builds a git repository

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "rag-bot"
#: Per branch: the questions whose relevant documents are not all in the top 3, and those
#: whose answer the fake judge finds unfaithful to the contexts.
DESIGNED = {"main": ([], []), "pr/retrieval": (["q05", "q06", "q07", "q08", "q11", "q13"], []),
            "pr/grounding": ([], ["q01", "q02", "q03", "q04", "q14"]), "pr/fix": ([], [])}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    repo = tmp_path_factory.mktemp("rag-bot") / "repo"
    done = subprocess.run([sys.executable, str(EXAMPLE / "build_repo.py"), str(repo)],
                          capture_output=True, text=True, check=True)
    return repo, json.loads(done.stdout)


def test_each_branch_breaks_what_it_was_made_to_break(built: tuple[Path, dict[str, str]],
                                                      tmp_path: Path) -> None:
    repo, shas = built
    assert list(shas) == list(DESIGNED)
    faithfulness = judge_spec(AssertionSpec("llm_judge", {"criterion": "faithfulness"}, 1),
                              Endpoint("openai/m"), lambda m: ValueError(m))
    for branch, (missed, unfaithful) in DESIGNED.items():
        tree = tmp_path / branch.replace("/", "-")
        subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", "--detach", str(tree),
                        shas[branch]], check=True, capture_output=True)
        rag = load_module(tree / "rag.py", f"rag_{tree.name.replace('-', '_')}")
        settings = json.loads((tree / "rag.json").read_text())
        docs = rag.load_docs(tree / "docs")
        examples = parse_dataset((tree / "evals/questions.jsonl").read_text(), "q.jsonl")
        got_missed, got_unfaithful = [], []
        for example in examples:
            ids = rag.retrieve(example.input, docs, settings)
            assert example.relevant_ids is not None
            if recall_at_k(ids, example.relevant_ids, 3) < 1.0:
                got_missed.append(example.id)
            passages = [f"# {docs[i][0]}\n{docs[i][1]}" for i in ids]
            answer = rag.answer(example.input, passages, settings)
            prompt = judge_messages(faithfulness, example, answer, passages)[1]["content"]
            if rag_reply(prompt).endswith("FAIL"):
                got_unfaithful.append(example.id)
        assert (branch, got_missed, got_unfaithful) == (branch, missed, unfaithful)


def test_the_build_is_reproducible_and_refuses_a_used_folder(
        built: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    repo, shas = built
    again = subprocess.run([sys.executable, str(EXAMPLE / "build_repo.py"), str(tmp_path / "b")],
                           capture_output=True, text=True, check=True)
    assert json.loads(again.stdout) == shas
    used = subprocess.run([sys.executable, str(EXAMPLE / "build_repo.py"), str(repo)],
                          capture_output=True, text=True)
    assert used.returncode == 1 and "not an empty directory" in used.stderr


def test_the_bot_writes_answer_contexts_and_ids(tmp_path: Path) -> None:
    (tmp_path / "in.json").write_text(json.dumps({"id": "x", "input": "Is a cracked screen "
                                                  "covered?", "vars": {}}))
    subprocess.run([sys.executable, str(EXAMPLE / "rag.py"), str(tmp_path / "in.json"),
                    str(tmp_path / "out.json")], check=True)
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["retrieved_ids"] == ["warranty"]
    assert out["output"] == ("Accidental damage such as a cracked screen is not covered by the "
                             "warranty.")
    assert out["contexts"][0].startswith("# Warranty\n")
