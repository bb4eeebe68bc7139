"""Redaction of secrets in what plugins write."""

from hostd.wire.redact import MASK, Redactor


def test_known_secret_shapes_are_masked() -> None:
    redact = Redactor(["hunter2-value"])
    assert redact("Authorization: Bearer abc.def.ghi") == f"Authorization: {MASK}"
    assert redact("calling with bearer eyJhbGciOiJIUzI1NiJ9") == f"calling with bearer {MASK}"
    assert redact('{"api_key": "k-123456"}') == f'{{"api_key": "{MASK}"}}'
    assert redact("password=letmein&user=bob") == f"password={MASK}&user=bob"
    assert redact("token: abc123 rest") == f"token: {MASK} rest"
    assert redact("key sk-abcdefghijklmnop1234") == f"key sk-{MASK}"
    assert redact("the value hunter2-value leaked") == f"the value {MASK} leaked"


def test_plain_text_is_unchanged() -> None:
    redact = Redactor(["abc"])  # shorter than 4: not treated as a secret
    assert redact("loading 3 tools from abc") == "loading 3 tools from abc"
