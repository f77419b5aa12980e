"""The digest by which a client's conversation finds its session again: what it keeps and
what it leaves out of the messages a client sends back."""

from __future__ import annotations

from agent.doors.openai.threads import digest

HI = {"role": "user", "content": "Hi"}


def test_what_clients_change_between_requests_is_left_out() -> None:
    answer = {"role": "assistant", "content": "Hello! How can I help?"}
    folded = {
        "role": "assistant",
        "content": '<details type="reasoning" done="true">\n<summary>Thought</summary>\n'
        "→ list_dir {}\n</details>\n\nHello!  How can I\nhelp?",
    }
    called = {"role": "assistant", "content": "", "tool_calls": [{"id": "c1"}]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "{}"}
    system = {"role": "system", "content": "Be brief."}
    plain = digest([HI, answer])
    assert plain is not None
    assert digest([system, HI, called, result, folded]) == plain


def test_what_makes_a_conversation_its_own_is_kept() -> None:
    assert digest([HI]) != digest([{"role": "user", "content": "Hi!"}])
    assert digest([HI]) != digest([{"role": "assistant", "content": "Hi"}])
    assert digest([]) is None and digest([{"role": "tool", "content": "x"}]) is None
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}
    text = {"type": "text", "text": "look"}
    with_image = digest([{"role": "user", "content": [text, image]}])
    # Only that a file was there counts, not its bytes nor where it sits among the words.
    assert with_image == digest([{"role": "user", "content": [image, text]}])
    assert with_image != digest([{"role": "user", "content": "look"}])
