"""tools/device_ab.sh, the one-call A/B of a source edit on the device: run here on a copy of the script
in a scratch tree, with a stand-in build command, so that a device call does not find it broken."""
import os
import pathlib
import shutil
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCE = "#pragma unroll(4)\nint x = 1;\n"


def _tree(tmp_path):
    (tmp_path / "tools").mkdir()
    for script in ("device_ab.sh", "stale_build.sh"):
        shutil.copy(ROOT / "tools" / script, tmp_path / "tools" / script)
    (tmp_path / "kernel.cu").write_text(SOURCE)
    return tmp_path


def _holds_only_the_mark(tree):
    # after a variant's build: its objects gone, build/ marked (tools/stale_build.sh)
    return sorted(p.name for p in (tree / "build").iterdir()) == [".device_ab_variant"]


def _ab(tree, expr, command, build="true", out="out"):
    # a stand-in build (some append a line to builds.txt, so the test sees how many builds ran); out=None
    # leaves OUT unset, to the script's default
    env = {k: v for k, v in os.environ.items() if k not in ("OUT", "SKIP_BUILD")}
    env.update(BUILD_CMD=build, **({"OUT": str(tree / out)} if out else {}))
    return subprocess.run(["bash", str(tree / "tools" / "device_ab.sh"), "kernel.cu", expr, "sh", "-c", command],
                          cwd=tree, capture_output=True, text=True, timeout=60, env=env)


def test_runs_head_then_variant_and_restores_the_file(tmp_path):
    tree = _tree(tmp_path)
    result = _ab(tree, "s/unroll(4)/unroll(1)/", 'echo "$AB_LABEL $(head -1 kernel.cu)" >> seen.txt',
                 build="echo built >> builds.txt")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tree / "seen.txt").read_text().splitlines() == ["head #pragma unroll(4)", "variant #pragma unroll(1)"]
    assert (tree / "builds.txt").read_text().splitlines() == ["built", "built"]
    assert (tree / "kernel.cu").read_text() == SOURCE
    assert "device_ab: variant ran, rc 0" in result.stdout


def test_the_variants_objects_go_with_it(tmp_path):
    # The next device call copies the sources back with times older than the variant's objects, so an
    # incremental build kept in build/ would install the variant again: the exit empties build/ but for
    # the mark once the variant was built, and leaves it when the run stopped before that.
    tree = _tree(tmp_path)
    result = _ab(tree, "s/unroll(4)/unroll(1)/", "true", build="mkdir -p build && touch build/kernel.o")
    assert result.returncode == 0, result.stdout + result.stderr
    assert _holds_only_the_mark(tree)
    shutil.rmtree(tree / "build")
    (tree / "build").mkdir()
    result = _ab(tree, "s/unroll(8)/unroll(1)/", "true")
    assert result.returncode == 1 and (tree / "build").is_dir()


def test_build_is_marked_while_it_holds_a_variant(tmp_path):
    tree = _tree(tmp_path)
    build = "mkdir -p build; if [ -f build/.device_ab_variant ]; then echo marked; else echo plain; fi >> builds.txt"
    result = _ab(tree, "s/unroll(4)/unroll(1)/", "true", build=build)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tree / "builds.txt").read_text().splitlines() == ["plain", "marked"]


def test_build_is_marked_while_it_holds_each_patchs_variant(tmp_path):
    tree = _tree(tmp_path)
    one = _patch(tree, "one.diff", [("kernel.cu", SOURCE, "#pragma unroll(1)\nint x = 1;\n")])
    two = _patch(tree, "two.diff", [("kernel.cu", SOURCE, "#pragma unroll(2)\nint x = 1;\n")])
    env = {k: v for k, v in os.environ.items() if k not in ("OUT", "SKIP_BUILD")}
    env.update(OUT=str(tree / "out"),
               BUILD_CMD="mkdir -p build; if [ -f build/.device_ab_variant ]; then echo marked; else echo plain; fi >> builds.txt")
    result = subprocess.run(["bash", str(tree / "tools" / "device_ab.sh"), "--patch", one, "--patch", two, "true"],
                            cwd=tree, capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tree / "builds.txt").read_text().splitlines() == ["plain", "marked", "marked"]
    assert _holds_only_the_mark(tree)


def test_the_mark_stays_until_a_head_build_succeeds(tmp_path):
    # The killed call's variant stays installed while builds fail: a SKIP_BUILD=1 run after a failed head
    # build must still refuse.
    tree = _tree(tmp_path)
    (tree / "build").mkdir()
    (tree / "build" / ".device_ab_variant").touch()
    result = _ab(tree, "s/unroll(4)/unroll(1)/", "true", build="false")
    assert result.returncode == 1 and "the head build FAILED" in result.stdout
    assert (tree / "build" / ".device_ab_variant").exists()
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    env.update(BUILD_CMD="true", OUT=str(tree / "out"), SKIP_BUILD="1")
    result = subprocess.run(["bash", str(tree / "tools" / "device_ab.sh"), "kernel.cu", "s/unroll(4)/unroll(1)/",
                             "true"], cwd=tree, capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 1 and "build again without SKIP_BUILD" in result.stdout


def test_a_killed_calls_variant_build_is_dropped_before_the_next_build(tmp_path):
    # A call the device's time limit kills never reaches the exit's cleanup: its build/ keeps the mark,
    # and the next call must not build incrementally on those objects (nor take the installed build as
    # the head's).
    tree = _tree(tmp_path)
    (tree / "build").mkdir()
    (tree / "build" / ".device_ab_variant").touch()
    (tree / "build" / "kernel.o").touch()
    result = _ab(tree, "s/unroll(4)/unroll(1)/", "true",
                 build="if [ -e build/kernel.o ]; then echo stale; else echo clean; fi >> builds.txt")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "removing them" in result.stdout
    assert (tree / "builds.txt").read_text().splitlines() == ["clean", "clean"]

    # the variant stays installed after the exit, so its mark does too: SKIP_BUILD=1 refuses
    assert _holds_only_the_mark(tree)
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    env.update(BUILD_CMD="true", OUT=str(tree / "out"), SKIP_BUILD="1")
    result = subprocess.run(["bash", str(tree / "tools" / "device_ab.sh"), "kernel.cu", "s/unroll(4)/unroll(1)/",
                             "true"], cwd=tree, capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 1 and "build again without SKIP_BUILD" in result.stdout
    assert (tree / "kernel.cu").read_text() == SOURCE and (tree / "build").is_dir()


def test_the_command_sees_out_and_its_failure_is_the_exit_status(tmp_path):
    tree = _tree(tmp_path)
    # OUT unset: the script's default reaches the command; the variant's run fails
    result = _ab(tree, "s/unroll(4)/unroll(1)/", '[ -d "$OUT" ] && ! grep -q "unroll(1)" kernel.cu', out=None)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "device_ab: head ran, rc 0" in result.stdout and "device_ab: variant ran, rc 1" in result.stdout
    assert (tree / "kernel.cu").read_text() == SOURCE


def test_a_bad_file_or_expression_is_refused_before_any_build(tmp_path):
    tree = _tree(tmp_path)
    for file, expr in (("kernel.cuh", "s/unroll(4)/unroll(1)/"), ("kernel.cu", "s/unroll(4)/unroll(1)")):
        result = subprocess.run(["bash", str(tree / "tools" / "device_ab.sh"), file, expr, "true"], cwd=tree,
                                capture_output=True, text=True, timeout=60,
                                env=dict(os.environ, BUILD_CMD="echo built >> builds.txt", OUT=str(tree / "out")))
        assert result.returncode == 2, result.stdout + result.stderr
        assert not (tree / "builds.txt").exists() and not (tree / "kernel.cuh").exists()
        assert (tree / "kernel.cu").read_text() == SOURCE


def test_an_edit_that_matches_nothing_stops_before_any_build(tmp_path):
    tree = _tree(tmp_path)
    result = _ab(tree, "s/unroll(8)/unroll(1)/", "echo ran >> seen.txt", build="echo built >> builds.txt")
    assert result.returncode == 1
    assert "changes nothing in kernel.cu" in result.stdout
    assert not (tree / "builds.txt").exists() and not (tree / "seen.txt").exists()


def test_a_failed_variant_build_stops_and_restores_the_file(tmp_path):
    tree = _tree(tmp_path)
    # the build fails once the edit is in place, as a variant that does not compile would, after writing
    # objects to build/ (which go with it)
    result = _ab(tree, "s/unroll(4)/unroll(1)/", "echo ran >> seen.txt",
                 build="mkdir -p build && ! grep -q 'unroll(1)' kernel.cu")
    assert result.returncode == 1
    assert "the variant build FAILED" in result.stdout
    assert (tree / "seen.txt").read_text().splitlines() == ["ran"]
    assert (tree / "kernel.cu").read_text() == SOURCE
    assert _holds_only_the_mark(tree)


def test_runs_from_another_directory(tmp_path):
    # the script works in its own tree wherever it is called from: the edit, the builds and build/'s removal
    (tmp_path / "repo").mkdir()
    tree = _tree(tmp_path / "repo")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("OUT", "SKIP_BUILD")}
    env.update(BUILD_CMD="mkdir -p build && echo built >> builds.txt", OUT=str(tree / "out"))
    result = subprocess.run(["bash", str(tree / "tools" / "device_ab.sh"), "kernel.cu", "s/unroll(4)/unroll(1)/",
                             "true"], cwd=elsewhere, capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tree / "builds.txt").read_text().splitlines() == ["built", "built"]
    assert (tree / "kernel.cu").read_text() == SOURCE and _holds_only_the_mark(tree)
    assert not any(elsewhere.iterdir())


def _patch(tree, name, edits):
    # a patch as `git diff` writes it (a/ and b/ prefixes), of each file's text to its edited text
    lines = []
    for path, old, new in edits:
        lines += [f"--- a/{path}", f"+++ b/{path}", "@@ -1,2 +1,2 @@"]
        lines += [f"-{line}" for line in old.splitlines()] + [f"+{line}" for line in new.splitlines()]
    (tree / name).write_text("\n".join(lines) + "\n")
    return name


def test_a_patch_edits_several_files_for_the_variant_and_comes_off(tmp_path):
    tree = _tree(tmp_path)
    (tree / "sub").mkdir()
    (tree / "sub" / "other.cuh").write_text("int y = 2;\nint z = 3;\n")
    patch = _patch(tree, "change.diff", [("kernel.cu", SOURCE, "#pragma unroll(1)\nint x = 1;\n"),
                                         ("sub/other.cuh", "int y = 2;\nint z = 3;\n", "int y = 5;\nint z = 3;\n")])
    env = {k: v for k, v in os.environ.items() if k not in ("OUT", "SKIP_BUILD")}
    env.update(BUILD_CMD="mkdir -p build && echo built >> builds.txt", OUT=str(tree / "out"))
    result = subprocess.run(["bash", str(tree / "tools" / "device_ab.sh"), "--patch", patch, "sh", "-c",
                             'echo "$AB_LABEL $(head -1 kernel.cu) $(head -1 sub/other.cuh)" >> seen.txt'],
                            cwd=tree, capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tree / "seen.txt").read_text().splitlines() == ["head #pragma unroll(4) int y = 2;",
                                                          "variant #pragma unroll(1) int y = 5;"]
    assert (tree / "builds.txt").read_text().splitlines() == ["built", "built"]
    assert (tree / "kernel.cu").read_text() == SOURCE
    assert (tree / "sub" / "other.cuh").read_text() == "int y = 2;\nint z = 3;\n"
    assert _holds_only_the_mark(tree) and "applied" in result.stdout


def test_a_patch_that_does_not_apply_is_refused_before_any_build(tmp_path):
    tree = _tree(tmp_path)
    stale = "#pragma unroll(8)\nint x = 1;\n"  # not kernel.cu's text
    patch = _patch(tree, "stale.diff", [("kernel.cu", stale, "#pragma unroll(1)\nint x = 1;\n")])
    for args in (["--patch", patch], ["--patch", "missing.diff"]):
        result = subprocess.run(["bash", str(tree / "tools" / "device_ab.sh"), *args, "echo", "ran"], cwd=tree,
                                capture_output=True, text=True, timeout=60,
                                env=dict(os.environ, BUILD_CMD="echo built >> builds.txt", OUT=str(tree / "out")))
        assert result.returncode == 2, result.stdout + result.stderr
        assert not (tree / "builds.txt").exists() and "ran" not in result.stdout
        assert (tree / "kernel.cu").read_text() == SOURCE


def test_a_patch_comes_off_after_a_failed_variant_build_and_a_tree_it_cannot_restore_fails(tmp_path):
    tree = _tree(tmp_path)
    patch = _patch(tree, "change.diff", [("kernel.cu", SOURCE, "#pragma unroll(1)\nint x = 1;\n")])
    env = {k: v for k, v in os.environ.items() if k not in ("OUT", "SKIP_BUILD")}

    def ab(build, command):
        return subprocess.run(["bash", str(tree / "tools" / "device_ab.sh"), "--patch", patch, "sh", "-c", command],
                              cwd=tree, capture_output=True, text=True, timeout=60,
                              env=dict(env, BUILD_CMD=build, OUT=str(tree / "out")))
    result = ab("! grep -q 'unroll(1)' kernel.cu", "true")  # the variant does not build
    assert result.returncode == 1 and "the variant build FAILED" in result.stdout
    assert (tree / "kernel.cu").read_text() == SOURCE
    # the variant's command edits a patched line, so the patch no longer comes off: the run fails
    result = ab("true", '[ "$AB_LABEL" = head ] || sed -i "s/unroll(1)/unroll(2)/" kernel.cu')
    assert result.returncode == 3 and "could not reverse" in result.stdout
    assert not list(tree.glob("*.orig")) and not list(tree.glob("*.rej"))


def test_several_patches_run_one_after_another_on_the_heads_tree(tmp_path):
    tree = _tree(tmp_path)
    (tree / "other.cuh").write_text("int y = 2;\nint z = 3;\n")
    one = _patch(tree, "unroll_one.diff", [("kernel.cu", SOURCE, "#pragma unroll(1)\nint x = 1;\n")])
    five = _patch(tree, "y_five.diff", [("other.cuh", "int y = 2;\nint z = 3;\n", "int y = 5;\nint z = 3;\n")])
    env = {k: v for k, v in os.environ.items() if k not in ("OUT", "SKIP_BUILD")}
    env.update(BUILD_CMD="mkdir -p build && echo built >> builds.txt", OUT=str(tree / "out"))
    command = 'echo "$AB_LABEL $(head -1 kernel.cu) $(head -1 other.cuh)" >> seen.txt'
    result = subprocess.run(["bash", str(tree / "tools" / "device_ab.sh"), "--patch", one, "--patch", five,
                             "sh", "-c", command], cwd=tree, capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    # each patch alone on the head's tree, named after its file
    assert (tree / "seen.txt").read_text().splitlines() == ["head #pragma unroll(4) int y = 2;",
                                                          "unroll_one #pragma unroll(1) int y = 2;",
                                                          "y_five #pragma unroll(4) int y = 5;"]
    assert (tree / "builds.txt").read_text().splitlines() == ["built"] * 3
    assert (tree / "kernel.cu").read_text() == SOURCE and (tree / "other.cuh").read_text() == "int y = 2;\nint z = 3;\n"
    # one patch of several that does not apply stops the call before any build
    stale = _patch(tree, "stale.diff", [("kernel.cu", "#pragma unroll(8)\nint x = 1;\n", "int x = 1;\nint w;\n")])
    (tree / "builds.txt").unlink()
    result = subprocess.run(["bash", str(tree / "tools" / "device_ab.sh"), "--patch", one, "--patch", stale,
                             "true"], cwd=tree, capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 2 and "does not apply" in result.stdout
    assert not (tree / "builds.txt").exists()
