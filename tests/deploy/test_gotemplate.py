"""The Go-template subset renderer the chart tests rely on (tests/deploy/gotemplate.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.deploy.gotemplate import Renderer, TemplateError, TemplateFail


def _render(source: str, **values: Any) -> str:
    return Renderer().render(source, {"Values": values, "Release": {"Name": "r"}})


def test_trimming_comments_and_fields() -> None:
    assert _render("a  {{- /* note */ -}}  b {{ .Values.x.y }}", x={"y": 2}) == "ab 2"
    assert _render("[{{ .Values.missing }}]") == "[]"


def test_if_else_if_else_follow_go_truth() -> None:
    source = "{{ if .Values.a }}A{{ else if .Values.b }}B{{ else }}C{{ end }}"
    assert _render(source, a=[1], b=True) == "A"
    assert _render(source, a=[], b="x") == "B"
    assert _render(source, a={}, b=0) == "C"


def test_pipelines_parentheses_and_helm_functions() -> None:
    assert _render('{{ .Values.t | default "latest" | quote }}', t="") == '"latest"'
    assert _render("{{ gt (int .Values.n) 1 }}", n="3") == "true"
    assert _render("{{ and .Values.a (not .Values.b) }}", a=1, b=0) == "true"
    assert _render("x:{{- toYaml .Values.m | nindent 2 }}", m={"b": 1, "a": [2]}) == (
        "x:\n  a:\n  - 2\n  b: 1"
    )
    assert _render('{{ printf "%s-%s" .Release.Name "x" | trunc 3 }}') == "r-x"


def test_define_and_include() -> None:
    renderer = Renderer()
    renderer.load_helpers('{{- define "n" -}}{{ .Release.Name }}!{{- end -}}')
    assert renderer.render('<{{ include "n" . }}>', {"Release": {"Name": "r"}}) == "<r!>"


def test_fail_and_required_refuse() -> None:
    with pytest.raises(TemplateFail, match="no"):
        _render('{{ if .Values.bad }}{{ fail "no" }}{{ end }}', bad=True)
    with pytest.raises(TemplateFail, match="need x"):
        _render('{{ required "need x" .Values.x }}')


@pytest.mark.parametrize(
    "source",
    ["{{ range .Values.l }}{{ end }}", "{{ if .Values.a }}", "{{ end }}", "{{ lookup 1 }}"],
)
def test_what_it_cannot_render_is_an_error(source: str) -> None:
    with pytest.raises(TemplateError):
        _render(source, l=[1], a=1)
