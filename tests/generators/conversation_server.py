"""A scripted LLM that writes conversation turns the way the prompts ask: each turn is built from what
the request shows it (the facts for turn 1, the earlier turns after that), so a test can see from the
replies that turn 2 was written from turn 1 and turn 3 from both."""

from __future__ import annotations

import json
import re

from tests.support.openai_server import Reply, json_completion

TURN = re.compile(r"Write turn (\d) of the conversation")


def shown(request: dict) -> tuple[int, str, list[dict]]:
    """(turn number, the facts block, the earlier turns) of a conversation request."""
    user = request["messages"][1]["content"]
    number = int(TURN.search(user).group(1))
    facts = user.split("<image_facts>")[1].split("</image_facts>")[0]
    block = user.split("<earlier_turns>")[1].split("</earlier_turns>")[0].strip()
    earlier = [] if block == "(none yet)" else [json.loads(line) for line in block.splitlines()]
    return number, facts, earlier


def first_label(facts: str) -> str:
    found = re.search(r'^- "([^"]+)" \[', facts, re.M)
    return found.group(1) if found else "nothing"


def write_turn(request: dict, *, leak: bool = False, delay: float = 0.0) -> Reply:
    """One turn. With `leak`, turn 2's instruction repeats turn 1's reference (the gate must drop it)."""
    number, facts, earlier = shown(request)
    label = first_label(facts)
    if number == 1:
        turn = {"task": "object recognition", "instruction": "What is the first thing you notice at the top?",
                "reference": f"The first thing at the top is a {label} shape drawn in colour.",
                "focus_points": [f"names the {label}"]}
    elif number == 2:
        found = earlier[0]["reference"]
        instruction = (f"Given that {found.lower()} why would it be placed there?" if leak
                       else "Why might the thing you just found be placed where it is?")
        turn = {"task": "cause inference", "instruction": instruction,
                "reference": f"Because [{found}] it draws the eye first.",
                "focus_points": ["gives a reason tied to the position"]}
    else:
        turn = {"task": "slogan writing", "instruction": "Write a two-line slogan that uses both of your answers.",
                "reference": f"Slogan from <{earlier[0]['reference']}> and <{earlier[1]['reference']}>.",
                "focus_points": ["uses the object", "uses the reason", "two lines"]}
    reply = json_completion(turn, prompt_tokens=300, completion_tokens=60)
    reply.delay = delay
    return reply
