"""The command modules are named by topic and registered as tables, not a chain (issue 40, item 3)."""

from __future__ import annotations

from pathlib import Path

from textkg.cli import main

CLI = Path(main.__file__).parent


def test_every_command_has_one_topic_and_is_listed_once():
    owners: dict[str, str] = {}
    for topic in main.TOPICS:
        for name in topic.PARSERS:
            assert name not in owners, f"{name} is added by {owners[name]} and {topic.__name__}"
            owners[name] = topic.__name__
    assert sorted(main.COMMANDS) == sorted(owners) and len(set(main.COMMANDS)) == len(main.COMMANDS)
    handled = {command for topic in main.TOPICS for command, _ in topic.HANDLERS}
    assert handled == set(owners)
    for topic in main.TOPICS:  # a topic handles only the commands it adds
        assert {command for command, _ in topic.HANDLERS} == set(topic.PARSERS), topic.__name__


def test_no_command_module_imports_another_mid_file():
    for path in CLI.glob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "E402" not in text, path.name
        assert "extra" not in path.stem and not path.stem.endswith("_commands"), path.name
