"""The package's surface: the typed stubs describe the native module."""

import ast
import pathlib

import sits
import sits._core as core

STUBS = pathlib.Path(sits.__file__).with_name("_core.pyi")


def stub_classes():
    """Each stub class with its methods and properties (the annotated
    instance attributes, like Error.code, are checked by the tests that
    raise them)."""
    tree = ast.parse(STUBS.read_text())
    return {
        node.name: {
            item.name
            for item in node.body if isinstance(item, ast.FunctionDef)
        }
        for node in tree.body if isinstance(node, ast.ClassDef)
    }


def test_stubs_match_the_module():
    classes = stub_classes()
    assert "py.typed" in {p.name for p in STUBS.parent.iterdir()}
    for name, members in classes.items():
        if name == "Stream" and not hasattr(core, "Stream"):
            continue
        assert hasattr(core, name), name
        native = getattr(core, name)
        for member in members:
            assert hasattr(native, member), f"{name}.{member}"
    public = {n for n in dir(core) if not n.startswith("_")}
    assert public <= set(classes), public - set(classes)


def test_error_codes_are_the_runtimes():
    names = set(sits.ErrorCode.__members__)
    assert {"InvalidEngine", "NoGpu", "PromptTooLong", "InvalidText",
            "NoTokenizer", "TemplateError"} <= names
    assert issubclass(sits.Error, RuntimeError)
    assert set(sits.__all__) >= {"Engine", "Tokenizer", "Error", "ErrorCode"}
