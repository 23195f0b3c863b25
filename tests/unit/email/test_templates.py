from __future__ import annotations

import threading
from collections.abc import Mapping

import pytest

from tidings.email.template_parser import MAX_NESTING
from tidings.email.templates import (
    CompiledEmailTemplate,
    EmailTemplate,
    RenderedEmail,
    RenderingError,
    Template,
    TemplateCache,
    TemplateSyntaxError,
    compile_email_template,
    parse_template_data,
)
from tidings.errors import TidingsError, ValidationError


def render(source: str, data: Mapping[str, object], *, html: bool = False) -> str:
    return Template.compile(source).render(data, escape_html=html)


def syntax_error(source: str, field: str = "template") -> TemplateSyntaxError:
    with pytest.raises(TemplateSyntaxError) as info:
        Template.compile(source, field)
    return info.value


# -- variables and paths --------------------------------------------------------------


def test_plain_text_is_returned_unchanged() -> None:
    assert render("Hello, world } { }}", {}) == "Hello, world } { }}"


def test_variables_and_dotted_paths() -> None:
    data = {"name": "Ann", "user": {"address": {"city": "Oslo"}}}
    assert render("Hi {{name}} from {{ user.address.city }}!", data) == "Hi Ann from Oslo!"


def test_slash_separator_and_bracket_segments() -> None:
    data = {"a": {"b": 1}, "first name": "Zoë", "odd-key": "x"}
    assert render("{{a/b}} {{[first name]}} {{odd-key}}", data) == "1 Zoë x"


def test_numeric_segments_index_lists() -> None:
    data = {"items": [{"name": "pen"}, {"name": "ink"}], "grid": [[1, 2], [3, 4]]}
    assert render("{{items.0.name}} {{items.1.name}} {{grid.1.0}} {{items.[1].name}}", data) == (
        "pen ink 3 ink"
    )


def test_numeric_segment_is_a_key_in_a_mapping() -> None:
    assert render("{{codes.404}}", {"codes": {"404": "Not Found"}}) == "Not Found"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, ""),
        (True, "true"),
        (False, "false"),
        (0, "0"),
        (1, "1"),
        (-12, "-12"),
        (2.5, "2.5"),
        (1.0, "1"),
        (-0.0, "0"),
        (1e16, "10000000000000000"),
        (1e21, "1e+21"),
        (-1.5e300, "-1.5e+300"),
        (1.5e-5, "0.000015"),
        (1e-8, "1e-8"),
        (float("nan"), "NaN"),
        (float("inf"), "Infinity"),
        (["a", 1, None, True], "a,1,,true"),
        ({"k": "v"}, "[object Object]"),
        ("", ""),
    ],
)
def test_values_render_like_handlebars(value: object, expected: str) -> None:
    assert render("{{v}}", {"v": value}) == expected


def test_null_renders_empty_but_missing_is_an_error() -> None:
    assert render("[{{v}}]", {"v": None}) == "[]"
    with pytest.raises(RenderingError) as info:
        render("[{{v}}]", {})
    assert info.value.path == "v"


def test_missing_nested_attribute_names_the_path_like_ses() -> None:
    with pytest.raises(RenderingError) as info:
        render("Hi {{user.name}}", {"user": {"id": 1}})
    assert info.value.path == "user.name"
    assert str(info.value) == "Attribute 'user.name' is not present in the rendering data."
    assert isinstance(info.value, TidingsError)


def test_missing_parent_object_is_reported_with_the_full_path() -> None:
    with pytest.raises(RenderingError) as info:
        render("{{user.name}}", {"user": None})
    assert info.value.path == "user.name"


def test_missing_inside_each_names_the_item_path() -> None:
    data = {"items": [{"name": "a"}, {"title": "b"}]}
    with pytest.raises(RenderingError) as info:
        render("{{#each items}}{{name}}{{/each}}", data)
    assert info.value.path == "items.1.name"


def test_missing_inside_with_names_the_full_path() -> None:
    with pytest.raises(RenderingError) as info:
        render("{{#with user}}{{name}}{{/with}}", {"user": {"id": 7}})
    assert info.value.path == "user.name"


def test_index_out_of_range_is_missing() -> None:
    with pytest.raises(RenderingError) as info:
        render("{{items.2}}", {"items": [1, 2]})
    assert info.value.path == "items.2"


def test_no_attribute_access_on_python_objects() -> None:
    for source in ("{{name.upper}}", "{{name.__class__}}", "{{items.length}}", "{{n.real}}"):
        with pytest.raises(RenderingError):
            render(source, {"name": "ann", "items": [1], "n": 3})


def test_unsupported_value_types_are_a_rendering_error() -> None:
    with pytest.raises(RenderingError) as info:
        render("{{v}}", {"v": object()})
    assert info.value.path == "v"


def test_unicode_keys_and_values() -> None:
    data = {"имя": "Сергей", "emoji": "🎉", "日本": {"語": "日本語"}}
    assert render("{{имя}} {{emoji}} {{日本.語}}", data) == "Сергей 🎉 日本語"


def test_variables_lists_top_level_names() -> None:
    template = Template.compile(
        "{{a.b}} {{#each items}}{{name}}{{../c}}{{@root.d.e}}{{/each}}"
        "{{#with u}}{{x}}{{../f}}{{/with}}{{#if g}}{{this.h}}{{/if}}"
    )
    assert template.variables == frozenset({"a", "items", "c", "d", "u", "f", "g", "h"})


def test_template_is_immutable() -> None:
    template = Template.compile("{{a}}")
    with pytest.raises(AttributeError):
        template.variables = frozenset()  # type: ignore[misc]
    with pytest.raises(AttributeError):
        template.extra = 1  # type: ignore[attr-defined]


# -- escaping and injection -----------------------------------------------------------


def test_html_escaping_covers_the_handlebars_set() -> None:
    value = "& < > \" ' ` ="
    assert render("{{v}}", {"v": value}, html=True) == "&amp; &lt; &gt; &quot; &#x27; &#x60; &#x3D;"
    assert render("{{v}}", {"v": value}, html=False) == value


def test_raw_output_is_never_escaped() -> None:
    data = {"v": "<b>&</b>"}
    assert (
        render("{{{v}}} {{& v}} {{v}}", data, html=True)
        == "<b>&</b> <b>&</b> &lt;b&gt;&amp;&lt;/b&gt;"
    )


def test_template_text_itself_is_not_escaped() -> None:
    assert render('<p class="x">{{v}} & co</p>', {"v": "A&B"}, html=True) == (
        '<p class="x">A&amp;B & co</p>'
    )


def test_data_with_mustaches_is_never_rendered_again() -> None:
    data = {"v": "{{secret}} {{#each x}}", "secret": "leak"}
    assert render("{{v}}", data) == "{{secret}} {{#each x}}"
    assert render("{{{v}}}", data, html=True) == "{{secret}} {{#each x}}"


def test_script_in_data_is_escaped_in_html_and_verbatim_in_text() -> None:
    compiled = compile_email_template("t", "Hi {{name}}", "<p>{{name}}</p>", "Hello {{name}}")
    name = "<script>alert('{{x}}')</script>"
    rendered = compiled.render({"name": name})
    assert rendered.html == "<p>&lt;script&gt;alert(&#x27;{{x}}&#x27;)&lt;/script&gt;</p>"
    assert rendered.text == f"Hello {name}"
    assert rendered.subject == f"Hi {name}"


# -- blocks ---------------------------------------------------------------------------


FALSY: list[object] = [False, None, "", 0, 0.0, [], float("nan")]
TRUTHY: list[object] = [True, "0", "false", " ", 1, -1, 0.5, [0], {}, {"a": 1}]


@pytest.mark.parametrize("value", FALSY)
def test_if_falsy_values(value: object) -> None:
    assert render("{{#if v}}yes{{else}}no{{/if}}", {"v": value}) == "no"
    assert render("{{#unless v}}yes{{else}}no{{/unless}}", {"v": value}) == "yes"


@pytest.mark.parametrize("value", TRUTHY)
def test_if_truthy_values(value: object) -> None:
    assert render("{{#if v}}yes{{else}}no{{/if}}", {"v": value}) == "yes"
    assert render("{{#unless v}}yes{{else}}no{{/unless}}", {"v": value}) == "no"


def test_missing_value_in_conditions_is_falsy_not_an_error() -> None:
    assert render("{{#if a.b.c}}yes{{else}}no{{/if}}", {}) == "no"
    assert render("{{#unless a}}none{{/unless}}", {}) == "none"
    assert render("{{#if a}}yes{{/if}}", {}) == ""


def test_else_if_chain() -> None:
    source = "{{#if a}}A{{else if b}}B{{else unless c}}notC{{else}}C{{/if}}"
    assert render(source, {"a": 1}) == "A"
    assert render(source, {"b": 1}) == "B"
    assert render(source, {}) == "notC"
    assert render(source, {"c": 1}) == "C"


def test_each_over_list_with_data_variables() -> None:
    source = "{{#each xs}}[{{@index}}:{{this}}:{{@first}}:{{@last}}:{{@key}}]{{/each}}"
    assert render(source, {"xs": ["a", "b", "c"]}) == (
        "[0:a:true:false:0][1:b:false:false:1][2:c:false:true:2]"
    )


def test_each_over_object_with_key() -> None:
    source = "{{#each prices}}{{@key}}={{.}}{{#unless @last}}, {{/unless}}{{/each}}"
    assert render(source, {"prices": {"tea": 2, "coffee": 3.5}}) == "tea=2, coffee=3.5"


def test_each_item_fields_and_this_forms() -> None:
    data = {"items": [{"name": "pen", "qty": 2}, {"name": "ink", "qty": 1}]}
    source = "{{#each items}}{{name}}/{{this.name}}/{{./qty}} {{/each}}"
    assert render(source, data) == "pen/pen/2 ink/ink/1 "


@pytest.mark.parametrize("value", [[], {}, None, "text", 0, 5, True])
def test_each_else_for_empty_or_non_iterable(value: object) -> None:
    assert render("{{#each xs}}item{{else}}empty{{/each}}", {"xs": value}) == "empty"


def test_each_else_for_missing_value() -> None:
    assert render("{{#each xs}}item{{else}}empty{{/each}}", {}) == "empty"
    assert render("{{#each xs}}item{{/each}}", {}) == ""


def test_each_else_runs_in_the_outer_context() -> None:
    assert render("{{#each xs}}{{y}}{{else}}{{y}}{{/each}}", {"xs": [], "y": "outer"}) == "outer"


def test_nested_each_with_parent_paths() -> None:
    data = {
        "shop": "S",
        "orders": [
            {"id": 1, "lines": [{"sku": "a"}, {"sku": "b"}]},
            {"id": 2, "lines": [{"sku": "c"}]},
        ],
    }
    source = (
        "{{#each orders}}{{#each lines}}{{../../shop}}-{{../id}}-{{sku}}-"
        "{{@../index}}{{/each}};{{/each}}"
    )
    with pytest.raises(TemplateSyntaxError):
        Template.compile(source)  # `@../index` is not supported
    source = (
        "{{#each orders}}{{#each lines}}{{../../shop}}-{{../id}}-{{sku}}-{{@index}} "
        "{{/each}}{{/each}}"
    )
    assert render(source, data) == "S-1-a-0 S-1-b-1 S-2-c-0 "


def test_parent_path_skips_if_and_unless_blocks() -> None:
    data = {"top": "T", "xs": [{"ok": True}]}
    source = "{{#each xs}}{{#if ok}}{{#unless nope}}{{../top}}{{/unless}}{{/if}}{{/each}}"
    assert render(source, data) == "T"


def test_data_variables_reach_through_with_and_if() -> None:
    data = {"xs": [{"u": {"n": "a"}}, {"u": {"n": "b"}}]}
    source = "{{#each xs}}{{#with u}}{{#if n}}{{@index}}{{n}}{{/if}}{{/with}}{{/each}}"
    assert render(source, data) == "0a1b"


def test_with_block_and_else() -> None:
    source = "{{#with user}}{{name}} ({{../site}}){{else}}nobody{{/with}}"
    assert render(source, {"user": {"name": "Ann"}, "site": "x"}) == "Ann (x)"
    empty: list[object] = [None, "", False, []]
    for value in empty:
        assert render(source, {"user": value, "site": "x"}) == "nobody"
    assert render(source, {"site": "x"}) == "nobody"


def test_with_zero_is_a_context() -> None:
    assert render("{{#with n}}[{{this}}]{{else}}none{{/with}}", {"n": 0}) == "[0]"


def test_root_data_variable() -> None:
    data = {"brand": "B", "xs": [{"brand": "inner"}]}
    assert render("{{#each xs}}{{brand}}/{{@root.brand}}{{/each}}", data) == "inner/B"


def test_this_at_top_level_is_the_whole_data() -> None:
    assert render("{{this}}", {"a": 1}) == "[object Object]"
    assert render("{{#with this}}{{a}}{{/with}}", {"a": 1}) == "1"


# -- comments and whitespace ----------------------------------------------------------


def test_comments_render_nothing() -> None:
    source = "a{{! short }}b{{!-- long with }} inside --}}c{{!--}}d"
    assert render(source, {}) == "abcd"


def test_whitespace_control() -> None:
    assert render("a  {{~v~}}  \n b", {"v": "X"}) == "aXb"
    assert render("<{{~#if t~}}  yes  {{~/if~}}>", {"t": True}) == "<yes>"
    assert render("a {{~! gone ~}} b", {}) == "ab"


def test_standalone_block_lines_leave_no_blank_lines() -> None:
    source = "Items:\n{{#each xs}}\n  - {{this}}\n{{/each}}\nDone\n"
    assert render(source, {"xs": ["a", "b"]}) == "Items:\n  - a\n  - b\nDone\n"
    source = "{{#if a}}\n  yes\n  {{else}}  \n  no\n{{/if}}\n"
    assert render(source, {"a": False}) == "  no\n"
    assert render("x\n  {{! note }}\ny", {}) == "x\ny"
    assert render("a\r\n{{#if t}}\r\nb\r\n{{/if}}\r\n", {"t": 1}) == "a\r\nb\r\n"


def test_tags_sharing_a_line_with_text_keep_their_whitespace() -> None:
    assert render("- {{#if a}}yes{{/if}} -\n", {"a": 1}) == "- yes -\n"
    assert render("{{#if a}}{{#if a}}\nx\n{{/if}}{{/if}}\n", {"a": 1}) == "\nx\n\n"


def test_escaped_mustache_is_literal() -> None:
    assert render(r"\{{name}} {{name}}", {"name": "n"}) == "{{name}} n"
    assert render(r"\\{{name}}", {"name": "n"}) == "\\n"
    assert render("a\\b {{name}}\\", {"name": "n"}) == "a\\b n\\"


# -- syntax errors --------------------------------------------------------------------


def test_syntax_error_is_a_validation_error_with_position() -> None:
    error = syntax_error("line one\nline two {{#if a}}\n\nend", field="Html")
    assert isinstance(error, ValidationError)
    assert error.field == "Html"
    assert (error.line, error.column) == (4, 4)
    assert str(error) == "Html: line 4, column 4: unclosed {{#if}} opened at line 2, column 10"


def test_mismatched_close_tag() -> None:
    error = syntax_error("{{#if a}}\n  {{/each}}")
    assert (error.line, error.column) == (2, 3)
    assert "'{{/each}}' does not match '{{#if}}' opened at line 1, column 1" in str(error)


@pytest.mark.parametrize(
    ("source", "line", "column", "fragment"),
    [
        ("a {{else}} b", 1, 3, "'{{else}}' outside a block"),
        ("x\n{{/if}}", 2, 1, "'{{/if}}' has no matching opening block"),
        ("hello {{name", 1, 7, "unclosed '{{'"),
        ("hello {{{name}}", 1, 7, "unclosed '{{{'"),
        ("x {{!-- never closed }}", 1, 3, "unclosed comment"),
        ("ab\n {{}}", 2, 2, "empty expression '{{}}'"),
        ("{{ }}", 1, 1, "empty expression"),
        ("{{#}}", 1, 1, "empty expression"),
        ("{{#foo bar}}{{/foo}}", 1, 1, "unknown block helper '{{#foo}}'"),
        ("{{#if}}{{/if}}", 1, 1, "'{{#if}}' takes exactly one argument"),
        ("{{#if a b}}{{/if}}", 1, 1, "'{{#if}}' takes exactly one argument"),
        ("{{#each xs as |x|}}{{/each}}", 1, 1, "'{{#each}}' takes exactly one argument"),
        ("é {{a..b}}", 1, 3, "invalid path 'a..b'"),
        ("{{a.}}", 1, 1, "invalid path 'a.'"),
        ("{{a.this}}", 1, 1, "invalid path 'a.this'"),
        ("{{a#b}}", 1, 1, "invalid path 'a#b'"),
        ("{{[a}}", 1, 1, "unclosed '['"),
        ("{{upper name}}", 1, 1, "helpers are not supported"),
        ("{{> partial}}", 1, 1, "not supported"),
        ("{{^if a}}{{/if}}", 1, 1, "not supported"),
        ("{{true}}", 1, 1, "literal 'true' is not supported"),
        ("{{@index}}", 1, 1, "'@index' is only defined inside '{{#each}}'"),
        ("{{@foo}}", 1, 1, "unknown data variable '@foo'"),
        ("{{#each xs}}{{else}}{{@index}}{{/each}}", 1, 21, "only defined inside"),
        ("{{../x}}", 1, 1, "'../' goes above the root data"),
        ("{{#if a}}{{../x}}{{/if}}", 1, 10, "'../' goes above the root data"),
        ("{{#each a}}{{else}}{{../x}}{{/each}}", 1, 20, "goes above the root"),
        ("{{#with a}}{{../../x}}{{/with}}", 1, 12, "goes above the root"),
        ("{{#if a}}{{else}}{{else}}{{/if}}", 1, 18, "second '{{else}}' in '{{#if}}'"),
        ("{{#if a}}{{else if b}}{{/unless}}", 1, 23, "does not match '{{#if}}'"),
        ("{{#if a}}{{else if b}}", 1, 23, "unclosed {{#if}} opened at line 1, column 1"),
    ],
)
def test_syntax_errors(source: str, line: int, column: int, fragment: str) -> None:
    error = syntax_error(source)
    assert (error.line, error.column) == (line, column)
    assert fragment in error.problem
    assert str(error).startswith(f"template: line {line}, column {column}: ")


def test_columns_count_characters_not_bytes() -> None:
    error = syntax_error("日本語 {{/if}}")
    assert (error.line, error.column) == (1, 5)


def test_nesting_limit() -> None:
    deep = "{{#if a}}" * (MAX_NESTING + 1) + "{{/if}}" * (MAX_NESTING + 1)
    assert "nested deeper" in syntax_error(deep).problem
    ok = "{{#if a}}" * MAX_NESTING + "x" + "{{/if}}" * MAX_NESTING
    assert render(ok, {"a": 1}) == "x"


# -- email templates ------------------------------------------------------------------


def test_email_escapes_only_the_html_part() -> None:
    compiled = compile_email_template(
        "order", "Your order from {{shop}}", "<h1>{{shop}}</h1>", "Thanks for shopping at {{shop}}"
    )
    assert compiled.render({"shop": "C&A"}) == RenderedEmail(
        subject="Your order from C&A",
        html="<h1>C&amp;A</h1>",
        text="Thanks for shopping at C&A",
    )


def test_email_parts_are_optional_but_one_body_is_required() -> None:
    html_only = compile_email_template("t", "S", "<p>{{a}}</p>", None)
    assert html_only.render({"a": 1}) == RenderedEmail("S", "<p>1</p>", None)
    text_only = compile_email_template("t", "S", "", "{{a}}")
    assert text_only.html is None
    assert text_only.render({"a": 1}) == RenderedEmail("S", None, "1")
    for html, text in ((None, None), ("", ""), (None, "")):
        with pytest.raises(ValidationError) as info:
            compile_email_template("t", "S", html, text)
        assert info.value.field == "TemplateContent"


@pytest.mark.parametrize(
    ("subject", "html", "text", "field"),
    [
        ("{{#if a}}", "ok", "ok", "Subject"),
        ("ok", "<p>{{/each}}</p>", "ok", "Html"),
        ("ok", "ok", "{{name", "Text"),
    ],
)
def test_email_errors_name_the_part(subject: str, html: str, text: str, field: str) -> None:
    with pytest.raises(TemplateSyntaxError) as info:
        compile_email_template("t", subject, html, text)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: line 1, column ")


def test_email_template_dataclass_compiles() -> None:
    stored = EmailTemplate(name="welcome", subject="Hi {{n}}", html=None, text="Welcome {{m}}")
    compiled = stored.compile()
    assert isinstance(compiled, CompiledEmailTemplate)
    assert compiled.name == "welcome"
    assert compiled.variables == frozenset({"n", "m"})
    with pytest.raises(RenderingError) as info:
        compiled.render({"n": 1})
    assert info.value.path == "m"


def test_subject_newlines_from_data_become_spaces() -> None:
    compiled = compile_email_template("t", "Re: {{s}}", None, "x")
    assert compiled.render({"s": "a\r\nBcc: evil@example.com\nb"}).subject == (
        "Re: a Bcc: evil@example.com b"
    )


def test_rendering_is_thread_safe() -> None:
    template = Template.compile("{{#each xs}}{{@index}}{{this}}{{/each}}")
    results: list[str] = []
    lock = threading.Lock()

    def work(n: int) -> None:
        for _ in range(200):
            out = template.render({"xs": [n] * 3}, escape_html=True)
            with lock:
                results.append(out)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(set(results)) == [f"0{n}1{n}2{n}" for n in range(4)]


# -- template data --------------------------------------------------------------------


def test_parse_template_data() -> None:
    assert parse_template_data('{"name": "Ann", "n": [1, 2.5, null]}') == {
        "name": "Ann",
        "n": [1, 2.5, None],
    }


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("{not json", "must be valid JSON"),
        ('{"a": NaN}', "must be valid JSON"),
        ('{"a": Infinity}', "must be valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('"text"', "must be a JSON object"),
        ("[" * 100_000, "must be valid JSON"),
    ],
)
def test_parse_template_data_rejects(text: str, rule: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_template_data(text)
    assert info.value.field == "TemplateData"
    assert info.value.rule.startswith(rule)


# -- cache ----------------------------------------------------------------------------


def test_cache_compiles_once_per_key() -> None:
    cache: TemplateCache[tuple[str, int], Template] = TemplateCache(max_size=4)
    calls: list[str] = []

    def factory(source: str) -> Template:
        calls.append(source)
        return Template.compile(source)

    first = cache.get_or_compile(("t", 1), lambda: factory("{{a}}"))
    again = cache.get_or_compile(("t", 1), lambda: factory("{{a}}"))
    updated = cache.get_or_compile(("t", 2), lambda: factory("{{b}}"))
    assert first is again
    assert updated is not first
    assert calls == ["{{a}}", "{{b}}"]
    assert len(cache) == 2


def test_cache_evicts_least_recently_used() -> None:
    cache: TemplateCache[str, int] = TemplateCache(max_size=2)
    cache.get_or_compile("a", lambda: 1)
    cache.get_or_compile("b", lambda: 2)
    cache.get_or_compile("a", lambda: 99)  # refreshes "a"
    cache.get_or_compile("c", lambda: 3)  # evicts "b"
    assert len(cache) == 2
    assert cache.get_or_compile("a", lambda: 100) == 1
    assert cache.get_or_compile("b", lambda: 20) == 20
    cache.clear()
    assert len(cache) == 0


def test_cache_factory_errors_are_not_cached() -> None:
    cache: TemplateCache[str, Template] = TemplateCache()
    with pytest.raises(TemplateSyntaxError):
        cache.get_or_compile("bad", lambda: Template.compile("{{#if}}"))
    assert len(cache) == 0


def test_cache_size_must_be_positive() -> None:
    with pytest.raises(ValueError):
        TemplateCache(max_size=0)
