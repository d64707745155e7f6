"""A scripted agent run in a child process, for the tests that resume a session elsewhere.

    python tests/scripted_agent.py home DIR {close|die}
    python tests/scripted_agent.py redis URL PREFIX {close|die}

It runs nine wrapped calls of a session "job" (a 6,000-token window, so results get
archived), prints the final history and the session state as JSON, then closes its compactor
or dies holding its lease. Not collected by pytest.
"""

from __future__ import annotations

import json
import os
import sys

from compactor import Compactor, CompactorConfig
from compactor.bench.trajectory import BASH_TOOL
from compactor.state import dump_state
from compactor.testing import FakeCompletion, ScriptedSummarizer

CONFIG = CompactorConfig(context_window=6000)


def build(argv: list[str]) -> Compactor:
    if argv[0] == "redis":
        return Compactor.from_url(
            argv[1], "gpt-4o", prefix=argv[2], config=CONFIG, summarizer=ScriptedSummarizer()
        )
    return Compactor("gpt-4o", config=CONFIG, home=argv[1], summarizer=ScriptedSummarizer())


def main(argv: list[str]) -> None:
    compactor = build(argv)
    fake = FakeCompletion()
    completion = compactor.wrap(fake)
    messages = [{"role": "system", "content": "agent"}, {"role": "user", "content": "task"}]
    for number in range(8):
        fake.enqueue(f"step {number}", tool_calls=[(f"c{number}", "bash", {"command": "ls"})])
        reply = completion(messages=messages, tools=[BASH_TOOL], session_id="job")
        messages.append(reply["choices"][0]["message"])
        messages.append(
            {
                "role": "tool",
                "tool_call_id": f"c{number}",
                "content": f"output {number}: résumé ✓ 中文 😀 " * 200,
            }
        )
    fake.enqueue("done")
    reply = completion(messages=messages, tools=[BASH_TOOL], session_id="job")
    messages.append(reply["choices"][0]["message"])
    state = dump_state(compactor._session("job").state)
    print(json.dumps({"messages": messages, "state": state}))
    sys.stdout.flush()
    if argv[-1] == "close":
        compactor.close()
    else:
        os._exit(0)  # dies holding its lease, closing nothing


if __name__ == "__main__":
    main(sys.argv[1:])
