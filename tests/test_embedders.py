"""Embedders behind one interface: the hashing default, an OpenAI-compatible endpoint (against a
real local server), the optional local model, and `embedder_from`."""

from __future__ import annotations

import asyncio
import base64
import sys
import time
from collections.abc import Iterator

import numpy as np
import pytest

from fadeway import _core, tokens, usage
from fadeway._constants import EMBED_DIM
from fadeway.embed import Embedder, EndpointEmbedder, HashingEmbedder, embedder_from
from fadeway.embed.local import resolve_model_dir
from fadeway.errors import (
    EmbedderMismatchError,
    EndpointError,
    EndpointResponseError,
    EndpointTimeout,
)
from fadeway.http import Endpoint
from openai_server import OpenAIServer, Recorded, Reply, embeddings_reply

TEXTS = [
    f"text number {i} about {w}"
    for i, w in enumerate(["cats", "dogs", "tea", "rain", "jazz", "chess", "bread", "rivers"])
]


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(dim=16) as s:
        yield s


@pytest.fixture
def make_embedder(server):
    made: list[Embedder] = []

    def make(**settings) -> EndpointEmbedder:
        endpoint = Endpoint(
            server.url, api_key="k", backoff_initial=0.01, **settings.pop("endpoint", {})
        )
        embedder = EndpointEmbedder(endpoint, model="test-model", **settings)
        made.append(embedder)
        return embedder

    yield make
    for embedder in made:
        embedder.close()


def embed(embedder: Embedder, texts, deadline: float | None = None) -> np.ndarray:
    return asyncio.run(embedder.embed(texts, deadline=deadline))


def vector_reply(*rows) -> Reply:
    return Reply(body={"data": [{"index": i, "embedding": list(r)} for i, r in enumerate(rows)]})


# -- hashing --------------------------------------------------------------------------------


def test_hashing_embedder_is_the_core_kernel_with_a_stable_name():
    embedder = HashingEmbedder()
    assert (embedder.name, embedder.dim) == (f"hashing-{EMBED_DIM}", EMBED_DIM)
    vectors = embed(embedder, TEXTS)
    assert vectors.shape == (len(TEXTS), EMBED_DIM) and vectors.dtype == np.float32
    np.testing.assert_array_equal(vectors, _core.hash_embed(TEXTS, EMBED_DIM))
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(embedder.embed_sync(TEXTS), vectors)


def test_empty_input_gives_zero_rows_of_the_dimension():
    assert embed(HashingEmbedder(64), []).shape == (0, 64)


def test_embed_sync_works_under_a_running_loop(make_embedder):
    embedder = make_embedder()

    async def main():
        return embedder.embed_sync(TEXTS[:2])  # the base twin hands the call to another thread

    assert asyncio.run(main()).shape == (2, 16)


@pytest.mark.parametrize("texts", ["one string", [b"bytes"], ["ok", None]])
def test_texts_must_be_a_sequence_of_str(texts):
    with pytest.raises(TypeError, match="str"):
        embed(HashingEmbedder(8), texts)


@pytest.mark.parametrize("dim", [0, -1, True, 2.0])
def test_hashing_dim_must_be_a_positive_int(dim):
    with pytest.raises(ValueError, match="positive int"):
        HashingEmbedder(dim)


# -- endpoint -------------------------------------------------------------------------------


def test_batches_are_sent_concurrently_and_reordered_by_index(server, make_embedder):
    embedder = make_embedder(batch_size=3)
    vectors = embed(embedder, TEXTS)
    # The server lists each batch's vectors in reverse; rows must come back in input order.
    np.testing.assert_allclose(vectors, _core.hash_embed(TEXTS, 16), atol=1e-6)
    assert vectors.dtype == np.float32 and vectors.flags["C_CONTIGUOUS"]
    sent = sorted((r.body["input"] for r in server.requests), key=lambda b: TEXTS.index(b[0]))
    assert sent == [TEXTS[0:3], TEXTS[3:6], TEXTS[6:8]]
    assert {r.body["model"] for r in server.requests} == {"test-model"}
    assert {r.path for r in server.requests} == {"/v1/embeddings"}
    assert embedder.name == "openai:test-model"


def test_rows_are_normalised(server, make_embedder):
    server.script(vector_reply([3.0, 4.0], [0.0, 0.0]))
    vectors = embed(make_embedder(), ["a", "b"])
    np.testing.assert_allclose(vectors, [[0.6, 0.8], [0.0, 0.0]], atol=1e-7)


def test_base64_embeddings_are_read(server, make_embedder):
    raw = base64.b64encode(np.array([1.0, 0.0, 0.0], dtype="<f4").tobytes()).decode()
    server.script(Reply(body={"data": [{"index": 0, "embedding": raw}]}))
    np.testing.assert_array_equal(embed(make_embedder(), ["a"]), [[1.0, 0.0, 0.0]])


def test_the_dimension_is_learned_from_the_first_answer(server, make_embedder):
    embedder = make_embedder()
    with pytest.raises(EndpointError, match="not known before its first answer"):
        _ = embedder.dim
    embed(embedder, ["a"])
    assert embedder.dim == 16


def test_empty_input_asks_the_dimension_once_when_unknown(server, make_embedder):
    embedder = make_embedder()
    assert embed(embedder, []).shape == (0, 16)
    assert embed(embedder, []).shape == (0, 16)
    assert len(server.requests) == 1
    assert embed(make_embedder(dim=16), []).shape == (0, 16)
    assert len(server.requests) == 1


def test_an_answer_of_another_dimension_than_given_is_a_mismatch(server, make_embedder):
    with pytest.raises(
        EmbedderMismatchError, match="16-dimensional vectors, but its dimension is 8"
    ):
        embed(make_embedder(dim=8), ["a"])


def test_an_answer_of_another_dimension_than_learned_is_a_mismatch(server, make_embedder):
    embedder = make_embedder()
    embed(embedder, ["a"])
    server.dim = 32  # the model behind the URL changed
    with pytest.raises(EmbedderMismatchError, match="32-dimensional"):
        embed(embedder, ["b"])
    assert embedder.dim == 16


@pytest.mark.parametrize(
    ("reply", "match"),
    [
        (vector_reply([1.0, 0.0]), "1 embeddings for 2 inputs"),
        (
            Reply(
                body={"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]}
            ),
            "index 0 twice",
        ),
        (
            Reply(
                body={"data": [{"index": 0, "embedding": [1.0]}, {"index": 2, "embedding": [1.0]}]}
            ),
            "index 2; allowed 0..1",
        ),
        (vector_reply([1.0, 0.0], [1.0]), r"lengths \[1, 2\]"),
        (vector_reply([], []), r"lengths \[0\]"),
        (
            Reply(
                body={
                    "data": [
                        {
                            "index": i,
                            "embedding": base64.b64encode(
                                np.array([np.nan, 1.0], dtype="<f4").tobytes()
                            ).decode(),
                        }
                        for i in range(2)
                    ]
                }
            ),
            "non-finite",
        ),
        (Reply(body={"data": [{"index": 0, "embedding": "***"}] * 2}), "neither a list"),
        (Reply(body=b'{"data": [{"index": 0, "embedding": [1e400]}]}'), "unexpected shape"),
        (Reply(body={"vectors": []}), "unexpected shape"),
        (Reply(body=b'{"data": [{"index": 0, "embedding": [0.1, 0.2'), "malformed JSON"),
    ],
)
def test_a_bad_answer_is_a_clear_error(server, make_embedder, reply, match):
    server.script(reply)
    with pytest.raises(EndpointResponseError, match=match):
        embed(make_embedder(), ["a", "b"])


def test_a_bad_answer_names_the_inputs_of_its_batch(server, make_embedder):
    def short_third(request: Recorded) -> Reply:
        if request.body["input"][0] == TEXTS[4]:
            return vector_reply([1.0, 0.0])
        return embeddings_reply(request, 16)

    server.script(*[short_third] * 4)
    with pytest.raises(EndpointResponseError, match=r"inputs 4\.\.5\) answered 1 embeddings"):
        embed(make_embedder(batch_size=2), TEXTS)


def test_a_failing_batch_fails_the_call_with_the_servers_message(server, make_embedder):
    def refuse_second(request: Recorded) -> Reply:
        if request.body["input"][0] == TEXTS[2]:
            return Reply(400, {"error": {"message": "input 2 is too long"}})
        return Reply(
            body={
                "data": [
                    {"index": i, "embedding": [1.0, 0.0]} for i in range(len(request.body["input"]))
                ]
            }
        )

    server.script(*[refuse_second] * 4)
    with pytest.raises(EndpointError, match="HTTP 400: input 2 is too long"):
        embed(make_embedder(batch_size=2), TEXTS)


def test_retries_and_deadline_come_from_the_endpoint(server, make_embedder):
    server.script(Reply(429, headers={"Retry-After": "0"}), Reply(503))
    assert embed(make_embedder(), ["a"]).shape == (1, 16)
    server.script(Reply(hang=True))
    with pytest.raises(EndpointTimeout):
        embed(make_embedder(), ["a"], deadline=time.monotonic() + 0.3)


def estimated(texts: list[str]) -> int:
    return sum(tokens.count_texts(tokens.encoding_for_model("test-model"), texts))


@pytest.mark.parametrize(
    ("reported", "tokens_in"),
    [
        ({"prompt_tokens": 9, "total_tokens": 9}, 9),
        ({"total_tokens": 5}, 5),
        ({"prompt_tokens": "many"}, None),  # unreadable: counted by fadeway
        (None, None),  # not reported: counted by fadeway
    ],
)
def test_each_request_is_recorded_with_the_tokens_it_read(
    server, make_embedder, reported, tokens_in
):
    def answer(request: Recorded) -> Reply:
        reply = embeddings_reply(request, 16)
        if reported is not None:
            reply.body["usage"] = reported
        return reply

    server.script(answer, answer)
    with usage.collecting() as used:
        embed(make_embedder(batch_size=5), TEXTS)
    batches = sorted((r.body["input"] for r in server.requests), key=lambda b: TEXTS.index(b[0]))
    expected = [tokens_in or estimated(batch) for batch in batches]
    assert all(n > 0 for n in expected)
    assert sorted(u.tokens_in for u in used) == sorted(expected)
    assert {(u.kind, u.model, u.tokens_out) for u in used} == {("embed", "test-model", 0)}
    assert all(u.seconds > 0 for u in used)


def test_an_unreadable_answer_is_recorded_all_the_same(server, make_embedder):
    server.script(Reply(body=b'{"data": [{"index": 0, "embedding": [0.1'))
    with usage.collecting() as used, pytest.raises(EndpointResponseError):
        embed(make_embedder(), ["a b c", "d"])
    assert [(u.kind, u.tokens_in) for u in used] == [("embed", estimated(["a b c", "d"]))]


def test_endpoint_embedder_from_env(server):
    env = {
        "FADEWAY_EMBEDDINGS_BASE_URL": server.url,
        "FADEWAY_EMBEDDINGS_MODEL": "env-model",
        "FADEWAY_EMBEDDINGS_API_KEY": "sk-env",
    }
    embedder = EndpointEmbedder.from_env(environ=env, batch_size=5)
    try:
        assert (embedder.name, embedder.batch_size) == ("openai:env-model", 5)
        embed(embedder, ["a"])
        assert server.requests[0].headers["authorization"] == "Bearer sk-env"
        assert server.requests[0].body["model"] == "env-model"
    finally:
        embedder.close()


def test_an_endpoint_embedder_needs_a_model():
    with pytest.raises(EndpointError, match="FADEWAY_EMBEDDINGS_MODEL"):
        EndpointEmbedder(Endpoint("http://127.0.0.1:9/v1"))


# -- embedder_from --------------------------------------------------------------------------


@pytest.mark.parametrize("spec", [None, "hashing", "offline"])
def test_the_default_is_the_hashing_embedder(spec):
    embedder = embedder_from(spec)
    assert isinstance(embedder, HashingEmbedder) and embedder.dim == EMBED_DIM


def test_embedder_from_names_and_instances():
    assert embedder_from("hashing-64").name == "hashing-64"
    assert embedder_from("hashing", dim=32).dim == 32
    given = HashingEmbedder(8)
    assert embedder_from(given) is given


def test_embedder_from_a_url_reads_the_model_from_argument_or_env(monkeypatch, server):
    monkeypatch.setenv("FADEWAY_EMBEDDINGS_MODEL", "env-model")
    monkeypatch.setenv("FADEWAY_EMBEDDINGS_API_KEY", "sk-env")
    from_env = embedder_from(server.url)
    given = embedder_from(server.url, model="arg-model", dim=16)
    try:
        assert isinstance(from_env, EndpointEmbedder) and from_env.name == "openai:env-model"
        assert given.name == "openai:arg-model" and given.dim == 16
        embed(given, ["a"])
        assert server.requests[0].headers["authorization"] == "Bearer sk-env"
    finally:
        from_env.close()
        given.close()


def test_embedder_from_an_openai_name_uses_the_env_base_url(server):
    env = {"FADEWAY_EMBEDDINGS_BASE_URL": server.url}
    embedder = embedder_from("openai:some-model", environ=env)
    try:
        assert isinstance(embedder, EndpointEmbedder)
        assert (embedder.name, embedder.endpoint.base_url) == ("openai:some-model", server.url)
    finally:
        embedder.close()


@pytest.mark.parametrize("spec", ["word2vec", "hashing-", "local:", "ftp://x"])
def test_embedder_from_refuses_unknown_specs(spec):
    with pytest.raises(ValueError, match="unknown embedder"):
        embedder_from(spec)


def test_embedder_from_refuses_other_types():
    with pytest.raises(TypeError, match="not int"):
        embedder_from(3)  # type: ignore[arg-type]


# -- local ----------------------------------------------------------------------------------


def test_the_local_embedder_without_its_extra_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # as if not installed
    with pytest.raises(ImportError, match=r"pip install fadeway\[local\]"):
        embedder_from(f"local:{tmp_path}")


def test_a_model_directory_is_used_as_given(tmp_path):
    assert resolve_model_dir(tmp_path) == tmp_path


def test_an_installed_package_resolves_to_its_model_directory(tmp_path, monkeypatch):
    package = tmp_path / "fadeway_test_model_pkg"
    (package / "weights" / "all-MiniLM").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "weights" / "all-MiniLM" / "modules.json").write_text("[]")
    (tmp_path / "fadeway_test_empty_pkg").mkdir()
    (tmp_path / "fadeway_test_empty_pkg" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert resolve_model_dir("fadeway_test_model_pkg") == package / "weights" / "all-MiniLM"
    with pytest.raises(FileNotFoundError, match="holds no model directory"):
        resolve_model_dir("fadeway_test_empty_pkg")


@pytest.mark.parametrize("spec", ["no/such/dir", "fadeway_no_such_package", "sentence-t5-base"])
def test_a_missing_model_is_not_downloaded(spec):
    with pytest.raises(FileNotFoundError, match="never downloads"):
        resolve_model_dir(spec)


def test_a_local_sentence_transformer_model_embeds(tmp_path):
    st = pytest.importorskip(
        "sentence_transformers",
        reason="the optional extra `local` (sentence-transformers) is not installed",
    )
    transformers = pytest.importorskip("transformers")
    from fadeway.embed import SentenceTransformerEmbedder

    # A tiny random BERT written to disk: the test needs no download and no model package.
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "cats", "dogs", "tea", "rain"]
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "vocab.txt").write_text("\n".join(words) + "\n")
    config = transformers.BertConfig(
        vocab_size=len(words),
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=16,
    )
    transformers.BertModel(config).save_pretrained(raw)
    transformers.BertTokenizer(str(raw / "vocab.txt")).save_pretrained(raw)
    model_dir = tmp_path / "tiny-model"
    import importlib

    try:  # sentence-transformers 6 moved the modules (the old path warns)
        models = importlib.import_module("sentence_transformers.sentence_transformer.modules")
    except ImportError:
        models = importlib.import_module("sentence_transformers.models")
    modules = [models.Transformer(str(raw)), models.Pooling(8)]
    st.SentenceTransformer(modules=modules).save(str(model_dir))

    embedder = SentenceTransformerEmbedder(model_dir)
    assert (embedder.name, embedder.dim) == ("local:tiny-model", 8)
    vectors = embed(embedder, ["cats", "tea rain"])
    assert vectors.shape == (2, 8) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(embedder.embed_sync(["cats", "tea rain"]), vectors)
    assert embed(embedder, []).shape == (0, 8)


def test_an_engine_opened_with_an_embeddings_url_learns_the_dimension(
    server, tmp_path, monkeypatch, caplog
):
    """`fadeway.open(embedder=URL)` cannot say the dimension: the memory's indexes ask the
    endpoint for it when they first open. While the endpoint fails, a turn goes on without a
    recall block; once it answers every turn recalls, with nothing lost in between."""
    import fadeway
    from fadeway.judge import ScriptedJudge
    from helpers import chat_reply

    monkeypatch.setenv("FADEWAY_EMBEDDINGS_MODEL", "test-model")
    server.script(Reply(400, {"error": {"message": "the model is loading"}}))
    with fadeway.open(
        tmp_path / "e.db", background=False, embedder=server.url, judge=ScriptedJudge()
    ) as eng:
        mem = eng.memory("m")
        history: list = []
        for t in range(4):
            history.append({"role": "user", "content": f"Where is the demo on day {t}?"})
            with caplog.at_level("ERROR", logger="fadeway"):
                req = mem.decorate({"model": "gpt-4.1", "messages": history})
            reply = chat_reply(f"The demo is in room {t}.")
            mem.report(req, reply)
            history.append(reply["choices"][0]["message"])
        assert len(mem.messages()) == 8
    failed = [r.getMessage() for r in caplog.records if "recall failed" in r.getMessage()]
    assert len(failed) == 1 and "loading" in failed[0]
    asked = [r for r in server.requests if r.path.endswith("/embeddings")]
    assert len(asked) >= 2 and all(r.body["model"] == "test-model" for r in asked)
