"""llama-server's command line on `specdec serve`: its sampling flags (--temp, -n, --seed and the
rest) set what a request gets when it leaves those fields out, on every endpoint, and a request's
own values still win; --alias names the model; --chat-template replaces the file's template; its
device and switch flags (-ngl, -fa, --mlock, --metrics, -cb, --no-webui, --jinja) are accepted.
Bad values stop the server before it loads a model, naming the flag."""

import json
import os
import subprocess

import pytest

from conftest import Server, post_json

PROMPT = "The capital of France is"
CHAT = [{"role": "user", "content": "Name three colours."}]


@pytest.fixture(scope="module")
def defaults_server(cli, models):
    """The tiny target, sampling at temperature 1 with a fixed seed, 5 tokens by default."""
    s = Server(cli, ["-m", models["target"], "-t", "2", "-c", "512", "--alias", "house-model",
                     "--temp", "1", "--top-k", "0", "-s", "7", "-n", "5", "--ignore-eos"])
    yield s
    code = s.stop()
    assert code == 0, f"server exit: {code}\n" + "".join(s.log[-30:])


def post(server, path, body):
    status, doc = post_json(server.base, path, body)
    assert status == 200, doc
    return doc


def speculative_and_plain(server, body):
    """The same greedy request with and without speculation: the text must match and the
    speculative one must have drafted. Returns the speculative reply."""
    spec = post(server, "/v1/completions", body)
    plain = post(server, "/v1/completions", {**body, "speculative": False})
    assert spec["choices"][0]["text"] == plain["choices"][0]["text"]
    assert spec["specdec"]["speculative"] is True and spec["specdec"]["rounds"] > 0, spec
    assert plain["specdec"]["rounds"] == 0
    return spec


def assert_refused_at_start(cli, models, flags, message):
    """`serve` with these flags exits non-zero, saying `message`, before it listens."""
    done = subprocess.run([cli, "serve", "-m", models["target"], "--port", "0", *flags],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode != 0 and message in done.stderr, done.stderr
    assert "listening" not in done.stderr


def test_a_request_that_sets_nothing_gets_the_servers_defaults(defaults_server):
    doc = post(defaults_server, "/v1/chat/completions", {"messages": CHAT})
    assert doc["usage"]["completion_tokens"] == 5  # -n 5, and --ignore-eos: always 5
    assert doc["choices"][0]["finish_reason"] == "length"
    # The default seed: the same text again, and the text a request sending the same settings
    # itself gets.
    again = post(defaults_server, "/v1/chat/completions", {"messages": CHAT})
    explicit = post(defaults_server, "/v1/chat/completions",
                    {"messages": CHAT, "temperature": 1, "top_k": 0, "seed": 7, "max_tokens": 5,
                     "ignore_eos": True})
    text = doc["choices"][0]["message"]["content"]
    assert again["choices"][0]["message"]["content"] == text
    assert explicit["choices"][0]["message"]["content"] == text


def test_the_requests_own_values_win(defaults_server):
    doc = post(defaults_server, "/v1/completions", {"prompt": PROMPT, "max_tokens": 3})
    assert doc["usage"]["completion_tokens"] == 3
    greedy = post(defaults_server, "/v1/completions",
                  {"prompt": PROMPT, "temperature": 0, "max_tokens": 8})
    other_seed = post(defaults_server, "/v1/completions",
                      {"prompt": PROMPT, "temperature": 0, "max_tokens": 8, "seed": 99})
    assert greedy["usage"]["completion_tokens"] == 8
    assert greedy["choices"][0]["text"] == other_seed["choices"][0]["text"]  # greedy: no seed


def test_every_endpoint_takes_them(defaults_server):
    native = post(defaults_server, "/completion", {"prompt": PROMPT})
    assert native["tokens_predicted"] == 5
    assert native["generation_settings"]["temperature"] == 1
    assert native["generation_settings"]["seed"] == 7
    # The request's n_predict -1 is its own "no limit": it runs to the context's end, not 5.
    unlimited = post(defaults_server, "/completion",
                     {"prompt": PROMPT, "n_predict": -1, "temperature": 0})
    assert unlimited["tokens_predicted"] > 5
    ollama = post(defaults_server, "/api/generate",
                  {"model": "house-model", "prompt": PROMPT, "stream": False})
    assert ollama["eval_count"] == 5
    messages = post(defaults_server, "/v1/messages",
                    {"model": "house-model", "max_tokens": 4, "messages": CHAT})
    assert messages["usage"]["output_tokens"] == 4  # Anthropic's max_tokens is required
    responses = post(defaults_server, "/v1/responses", {"input": "Name three colours."})
    assert responses["usage"]["output_tokens"] == 5
    assert responses["temperature"] == 1 and responses["max_output_tokens"] == 5


def test_introspection_reports_the_defaults_and_the_alias(defaults_server):
    props = json.loads(defaults_server.get("/props"))
    settings = props["default_generation_settings"]["params"]
    assert settings["n_predict"] == 5 and settings["seed"] == 7
    assert settings["temperature"] == 1 and settings["top_k"] == 0
    assert props["model_alias"] == "house-model"
    show = post(defaults_server, "/api/show", {"model": "house-model"})
    assert "temperature 1" in show["parameters"] and "top_k 0" in show["parameters"]
    models = json.loads(defaults_server.get("/v1/models"))
    assert [m["id"] for m in models["data"]] == ["house-model"]
    # The file's stem and "specdec" still name the model; another name does not.
    for name in ("house-model", "tiny-target", "specdec"):
        doc = post(defaults_server, "/v1/completions", {"model": name, "prompt": PROMPT})
        assert doc["model"] == name
    status, doc = post_json(defaults_server.base, "/v1/completions",
                            {"model": "other", "prompt": PROMPT})
    assert status == 404, doc


@pytest.mark.parametrize("flags,message", [
    (["--temp", "3"], "--temp: 'temperature' must be between 0 and 2, got 3"),
    (["-n", "0"], "--n-predict: 'max_tokens' must be between 1"),
    (["--samplers", "top_k;warmth"], "--samplers: no sampler named 'warmth'"),
    (["--top-p", "lots"], "--top-p expects a number"),
])
def test_bad_defaults_stop_the_server_before_it_loads(cli, models, flags, message):
    assert_refused_at_start(cli, models, flags, message)


def test_a_chat_template_in_place_of_the_files(cli, models, tmp_path):
    """--chat-template NAME or --chat-template-file (a Jinja template of a family specdec
    renders) replaces the file's template; --jinja is accepted as llama-server's command lines
    write it."""
    phi3 = tmp_path / "phi3.jinja"
    phi3.write_text("{% for m in messages %}{{ '<|' + m['role'] + '|>\\n' + m['content'] + "
                    "'<|end|>\\n' }}{% endfor %}{{ '<|assistant|>\\n' }}")
    messages = [{"role": "user", "content": "Hi"}]
    for flags, want in ((["--chat-template", "llama2", "--jinja"], "[INST] Hi [/INST]"),
                        (["--chat-template-file", str(phi3)], "<|user|>\nHi<|end|>\n<|assistant|>\n")):
        s = Server(cli, ["-m", models["target"], "-t", "1", "-c", "256", *flags])
        try:
            doc = post(s, "/apply-template", {"messages": messages})
            assert want in doc["prompt"]
            props = json.loads(s.get("/props"))
            assert props["chat_template"] == (flags[1] if flags[0] == "--chat-template"
                                              else phi3.read_text())
        finally:
            assert s.stop() == 0


@pytest.mark.parametrize("flags,message", [
    (["--chat-template", "vicuna"], "--chat-template: chat template 'vicuna' is neither"),
    (["--chat-template-file", "/nonexistent.jinja"], "/nonexistent.jinja"),
])
def test_a_chat_template_specdec_does_not_render_stops_the_server(cli, models, flags, message):
    assert_refused_at_start(cli, models, flags, message)


def test_llama_servers_device_and_switch_flags_are_accepted(cli, models):
    s = Server(cli, ["-m", models["target"], "-t", "1", "-c", "256", "-ngl", "99", "-fa", "on",
                     "--mlock", "--metrics", "-cb", "--no-webui", "--jinja"])
    try:
        doc = post(s, "/v1/completions", {"prompt": PROMPT, "max_tokens": 2})
        assert doc["usage"]["completion_tokens"] <= 2
        log = "".join(s.log)
        assert "-ngl 99 changes nothing: specdec has no GPU offload" in log
        assert "--flash-attn on changes nothing" in log
        # --mlock locked the memory, or said why it could not. (Sanitizer runtimes intercept
        # mlockall and lock nothing, so there only the report is checked.)
        assert "--mlock: memory locked" in log or "--mlock: mlockall failed" in log, log
        if os.environ.get("SPECDEC_SANITIZED") != "1":
            with open(f"/proc/{s.proc.pid}/status") as f:
                locked_kib = int(next(line for line in f if line.startswith("VmLck:")).split()[1])
            assert locked_kib > 0 or "--mlock: mlockall failed" in log, log
    finally:
        assert s.stop() == 0


def test_the_servers_limit_ends_at_the_context_where_the_clients_is_refused(cli, models):
    """-n past what the context leaves: a request that sets no limit runs to the context's end
    (as llama-server's -n does); a client's own limit past it is still a 400."""
    s = Server(cli, ["-m", models["target"], "-t", "1", "-c", "128", "-n", "1000", "--ignore-eos"])
    try:
        doc = post(s, "/v1/chat/completions", {"messages": CHAT})
        usage = doc["usage"]
        assert usage["prompt_tokens"] + usage["completion_tokens"] == 128
        assert doc["choices"][0]["finish_reason"] == "length"
        status, err = post_json(s.base, "/v1/chat/completions",
                                {"messages": CHAT, "max_tokens": 1000})
        assert status == 400 and err["error"]["code"] == "context_length_exceeded", err
        # The other endpoints take the server's limit the same way.
        ollama = post(s, "/api/generate", {"model": "tiny-target", "prompt": PROMPT,
                                           "stream": False})
        assert ollama["done_reason"] == "length", ollama
        assert ollama["prompt_eval_count"] + ollama["eval_count"] >= 128
        native = post(s, "/completion", {"prompt": PROMPT})
        assert native["tokens_evaluated"] + native["tokens_predicted"] >= 128
        responses = post(s, "/v1/responses", {"input": "Name three colours."})
        assert responses["status"] == "incomplete", responses
    finally:
        assert s.stop() == 0


def test_llama_servers_speculative_command_line(cli, models):
    """A llama-server speculative command line, recent spellings, runs unchanged: the draft
    drafts (rounds > 0), greedy text is the target's own, and /completion reports the settings,
    which a request's speculative.* fields override."""
    s = Server(cli, ["-m", models["target"], "--spec-draft-model", models["draft"], "-t", "1",
                     "-c", "256", "-np", "1", "--spec-type", "draft-simple",
                     "--spec-draft-n-max", "6", "--spec-draft-n-min", "2",
                     "--spec-draft-p-min", "0.5", "--spec-draft-ngl", "99", "-cd", "256",
                     "-td", "1", "--spec-draft-type-k", "f16"])
    try:
        spec = speculative_and_plain(s, {"prompt": PROMPT, "max_tokens": 16, "temperature": 0,
                                         "ignore_eos": True})
        assert spec["specdec"]["draft_max"] == 6
        native = post(s, "/completion", {"prompt": PROMPT, "n_predict": 4, "temperature": 0})
        settings = native["generation_settings"]
        assert settings["speculative.n_max"] == 6
        assert settings["speculative.n_min"] == 2
        assert settings["speculative.p_min"] == pytest.approx(0.5)
        own = post(s, "/completion", {"prompt": PROMPT, "n_predict": 4, "temperature": 0,
                                      "speculative.n_max": 3, "speculative.n_min": 1,
                                      "speculative.p_min": 0.25})
        assert own["content"] == native["content"]
        settings = own["generation_settings"]
        assert (settings["speculative.n_max"], settings["speculative.n_min"]) == (3, 1)
        assert settings["speculative.p_min"] == pytest.approx(0.25)
        log = "".join(s.log)
        assert "-ngld 99 changes nothing" in log and "--threads-draft 1 changes nothing" in log
    finally:
        assert s.stop() == 0


def test_spec_type_none_leaves_the_draft_out(cli, models):
    s = Server(cli, ["-m", models["target"], "-md", models["draft"], "-t", "1", "-c", "256",
                     "--spec-type", "none"])
    try:
        doc = post(s, "/v1/completions", {"prompt": PROMPT, "max_tokens": 8, "temperature": 0})
        assert doc["specdec"]["rounds"] == 0
        assert "is not loaded" in "".join(s.log)
        native = post(s, "/completion", {"prompt": PROMPT, "n_predict": 2})
        assert native["generation_settings"]["speculative"] is False
    finally:
        assert s.stop() == 0


def test_spec_type_ngram_alone_serves_prompt_lookup(cli, models):
    """llama-server's --spec-type ngram-mod without a draft model: requests draft by prompt
    lookup (the text is the target's own; rounds happen once the text repeats itself)."""
    s = Server(cli, ["-m", models["target"], "-t", "1", "-c", "512", "-np", "2",
                     "--spec-type", "ngram-mod", "--ngram-max", "4", "--ngram-policy", "fixed"])
    try:
        prompt = "one two three four one two three four one two three four one two"
        speculative_and_plain(s, {"prompt": prompt, "max_tokens": 48, "temperature": 0,
                                  "ignore_eos": True})
        native = post(s, "/completion", {"prompt": prompt, "n_predict": 2})
        assert native["generation_settings"]["speculative"] is True
        assert json.loads(s.get("/props"))["default_generation_settings"]["speculative"] is True
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize("flags,message", [
    (["--spec-type", "draft-mtp"], "draft heads built into a model"),
    (["--spec-type", "draft-simple"], "--spec-type draft-simple needs a draft model"),
    (["--spec-type", "draft-simple,ngram-mod", "--no-draft-hybrid", "-md", "DRAFT"],
     "contradict each other"),
    (["--spec-draft-p-min", "2"], "--spec-draft-p-min"),
    (["--ngram-max", "2"], "the --ngram-* options tune prompt lookup"),
    (["--spec-draft-n-min", "99"], "--spec-draft-n-min"),
])
def test_bad_speculative_flags_stop_the_server_before_it_loads(cli, models, flags, message):
    flags = [models["draft"] if f == "DRAFT" else f for f in flags]
    assert_refused_at_start(cli, models, flags, message)


def test_llama_servers_other_common_flags_are_taken(cli, models):
    """The rest of a typical llama-server command line: -to sets how long a request may take to
    arrive (a client that sends half its headers gets a 408 after it), the flags that cannot
    change anything here are accepted with a note, and those for what specdec always does
    silently."""
    import socket
    import time
    s = Server(cli, ["-m", models["target"], "-t", "1", "-c", "256", "-b", "2048", "-ub", "512",
                     "--keep", "0", "--no-context-shift", "--cache-reuse", "256", "--no-warmup",
                     "--slots", "--props", "--threads-http", "4", "-sps", "0.5", "-to", "1",
                     "--numa", "distribute"])
    try:
        doc = post(s, "/v1/completions", {"prompt": PROMPT, "max_tokens": 2})
        assert doc["usage"]["completion_tokens"] <= 2
        log = "".join(s.log)
        for note in ("--batch-size 2048 changes nothing", "--ubatch-size 512 changes nothing",
                     "--keep 0 changes nothing", "--cache-reuse 256 changes nothing",
                     "--threads-http 4 changes nothing", "--slot-prompt-similarity 0.5",
                     "--numa distribute changes nothing"):
            assert note in log, (note, log)
        assert "--no-warmup" not in log and "--slots" not in log
        host, port = s.base.split("//")[1].split(":")
        with socket.create_connection((host, int(port))) as c:
            start = time.monotonic()
            c.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
            c.settimeout(10)
            answer = c.recv(4096)
            waited = time.monotonic() - start
        assert answer.startswith(b"HTTP/1.1 408 "), answer[:100]
        assert 0.9 <= waited < 5, waited  # -to 1, not the default 20 s
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize("flags,message", [
    (["--context-shift"], "--context-shift: specdec does not shift the context"),
    (["-b", "0"], "--batch-size must be at least 1"),
    (["--numa", "everywhere"], "--numa must be distribute, isolate or numactl"),
    (["-to", "0"], "--timeout must be in [0.1, 3600]"),
])
def test_llama_server_flags_specdec_cannot_honour_stop_it(cli, models, flags, message):
    assert_refused_at_start(cli, models, flags, message)


def test_chat_with_spec_type_ngram_drafts_by_prompt_lookup(cli, models):
    """`specdec chat --spec-type ngram-simple`: replies draft by prompt lookup, and say what the
    target alone says."""
    base = [cli, "chat", "-m", models["target"], "--temp", "0", "-n", "24", "-t", "1",
            "-c", "512"]
    script = "one two three one two three one two three\n/stats\n"
    plain = subprocess.run(base, input=script, capture_output=True, text=True, timeout=120)
    lookup = subprocess.run([*base, "--spec-type", "ngram-simple"], input=script,
                            capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0 and lookup.returncode == 0, plain.stderr + lookup.stderr
    reply = plain.stdout.split("last turn:")[0]
    assert lookup.stdout.startswith(reply), (reply, lookup.stdout)
    assert "speculative: gamma 8" in lookup.stdout, lookup.stdout  # lookup's default cap
    assert "speculative: gamma" not in plain.stdout
