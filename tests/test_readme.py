"""The README's API reference and opening commands stay in step with the code and with CI."""
import pathlib
import re

import pytest
import torch

import torch_tiles

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def section(text: str, heading: str) -> str:
    """The body under the first heading that starts with `heading`, up to the next heading of its level
    or above."""
    level = len(heading) - len(heading.lstrip("#"))
    match = re.search(rf"^{re.escape(heading)}.*$", text, re.MULTILINE)
    assert match, f"README has no heading {heading!r}"
    rest = text[match.end():]
    end = re.search(rf"^#{{1,{level}}} ", rest, re.MULTILINE)
    return rest[:end.start()] if end else rest


API = section(README, "## API")


@pytest.mark.parametrize("op, names", [("map", torch_tiles.MAP_FNS), ("zip", torch_tiles.ZIP_FNS),
                                       ("reduce", torch_tiles.REDUCE_FNS)])
def test_every_fn_name_has_a_row_in_its_ops_api_section(op, names):
    body = section(API, f"### `tiles::{op}(")
    rows = set(re.findall(r"^\| `(\w+)` \|", body, re.MULTILINE)) - {"fn"}  # less the header row
    assert sorted(set(names) - rows) == [], f"fn names of tiles::{op} missing from its README table"
    assert sorted(rows - set(names)) == [], f"README documents fn names tiles::{op} does not have"


def test_every_op_schema_is_in_the_api_section():
    for op in ("map", "zip", "reduce", "bmm"):
        schema = str(getattr(torch.ops.tiles, op).default._schema)  # "tiles::map(Tensor x, str fn) -> Tensor"
        assert f"### `{schema}`" in API, schema


def test_functional_and_nn_are_in_the_api_section():
    for name in torch_tiles.functional.__all__ + torch_tiles.nn.__all__:
        assert f"`{name}(" in API, name


def test_readme_opens_with_the_two_commands_and_ci_runs_the_test_one():
    opening = README.split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", opening, re.DOTALL)
    assert block, "the README's opening has no command block"
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]
    assert len(commands) == 2, commands
    assert commands[0].startswith('pip install ".[examples]" && python examples/train.py'), commands[0]
    assert commands[1].startswith('pip install ".[test]" && pytest'), commands[1]
    assert commands[1] in (ROOT / ".ci" / "run").read_text(), "CI must run the README's test command"
