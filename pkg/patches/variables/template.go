package variables

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
	"unicode/utf8"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// Template is a parsed valueFrom.template.
type Template struct {
	tmpl *template.Template
	// parts, when set, is the template as text and root field chains
	// ({{ .builtin.parent.metadata.name }}), which the common templates
	// are: they are written without text/template's reflection.
	parts []part
}

// part of a simple template: literal text, or the variable at a field
// chain (path).
type part struct {
	text string
	path []string
}

// ParseTemplate parses a valueFrom.template and checks that every variable
// it names from the root (.builtin... or $.builtin...) exists for a child.
// A key a template reads that the parent does not set is an error when it
// runs, not a silent "<no value>".
func ParseTemplate(text string) (*Template, error) {
	tmpl, err := template.New("valueFrom.template").Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("does not parse: %w", err)
	}
	var problems []string
	if tmpl.Tree != nil {
		walk(tmpl.Tree.Root, func(idents []string) {
			if len(idents) > 0 && idents[0] == Builtin {
				if err := CheckPath(strings.Join(idents, "."), ChildScope); err != nil {
					problems = append(problems, err.Error())
				}
			}
		})
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("names unknown variables: %s", strings.Join(problems, "; "))
	}
	return &Template{tmpl: tmpl, parts: simpleParts(tmpl)}, nil
}

// simpleParts returns the parts of a template made only of text and
// actions that print one field chain from the root; nil for any other.
func simpleParts(tmpl *template.Template) []part {
	if tmpl.Tree == nil || tmpl.Tree.Root == nil || len(tmpl.Templates()) != 1 {
		return nil
	}
	var parts []part
	for _, n := range tmpl.Tree.Root.Nodes {
		switch n := n.(type) {
		case *parse.TextNode:
			parts = append(parts, part{text: string(n.Text)})
		case *parse.ActionNode:
			if n.Pipe == nil || len(n.Pipe.Decl) > 0 || len(n.Pipe.Cmds) != 1 || len(n.Pipe.Cmds[0].Args) != 1 {
				return nil
			}
			field, ok := n.Pipe.Cmds[0].Args[0].(*parse.FieldNode)
			if !ok {
				return nil
			}
			parts = append(parts, part{path: field.Ident})
		default:
			return nil
		}
	}
	return parts
}

// executeSimple writes a simple template as text/template would, for the
// values it prints the same way (strings, integers, booleans); false for
// anything else, a missing key included, which text/template then handles
// (and reports).
func (t *Template) executeSimple(values Source) ([]byte, bool) {
	if t.parts == nil {
		return nil, false
	}
	var out []byte
	for _, p := range t.parts {
		if p.path == nil {
			out = append(out, p.text...)
			continue
		}
		cur, ok := values.Get(p.path)
		if !ok {
			return nil, false
		}
		switch v := cur.(type) {
		case string:
			out = append(out, v...)
		case int64:
			out = strconv.AppendInt(out, v, 10)
		case bool:
			out = strconv.AppendBool(out, v)
		default:
			return nil, false
		}
	}
	return out, true
}

// Execute runs the template over a child's variables and reads its output as
// YAML, JSON included, as Cluster API does: "3" is a number, "true" a
// boolean, "[a, b]" a list, "x" a string. Numbers that are integers stay
// int64.
func (t *Template) Execute(values Source) (interface{}, error) {
	text, ok := t.executeSimple(values)
	if !ok {
		var out bytes.Buffer
		if err := t.tmpl.Execute(&out, map[string]interface{}(values.All())); err != nil {
			return nil, err
		}
		text = out.Bytes()
	}
	// The most common output, a quoted string without escapes, is that
	// string.
	if plainQuoted(text) {
		return string(text[1 : len(text)-1]), nil
	}
	var v interface{}
	// JSON is YAML: most outputs (a quoted string, a number) need no YAML
	// parser, which costs far more.
	if utiljson.Unmarshal(text, &v) == nil {
		return v, nil
	}
	data, err := yaml.YAMLToJSON(text)
	if err != nil {
		return nil, fmt.Errorf("its output %q is not YAML: %w", truncate(string(text)), err)
	}
	if err := utiljson.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("its output %q is not a value: %w", truncate(string(text)), err)
	}
	return v, nil
}

// plainQuoted tells whether text is a JSON string that needs no decoding:
// quoted, with no escape, quote or control character inside.
func plainQuoted(text []byte) bool {
	n := len(text)
	if n < 2 || text[0] != '"' || text[n-1] != '"' || !utf8.Valid(text) {
		return false
	}
	for _, c := range text[1 : n-1] {
		if c < 0x20 || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

func truncate(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// walk calls visit with the identifiers of every field chain that starts
// at the template's root data: .a.b and $.a.b. Chains inside range and with
// start at another dot and are seen by visit too; only those whose first
// identifier is "builtin" are worth checking.
func walk(node parse.Node, visit func([]string)) {
	switch n := node.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			walk(c, visit)
		}
	case *parse.ActionNode:
		walk(n.Pipe, visit)
	case *parse.PipeNode:
		if n == nil {
			return
		}
		for _, c := range n.Cmds {
			walk(c, visit)
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			walk(a, visit)
		}
	case *parse.FieldNode:
		visit(n.Ident)
	case *parse.VariableNode:
		if len(n.Ident) > 1 && n.Ident[0] == "$" {
			visit(n.Ident[1:])
		}
	case *parse.ChainNode:
		walk(n.Node, visit)
	case *parse.IfNode:
		walkBranch(&n.BranchNode, visit)
	case *parse.RangeNode:
		walkBranch(&n.BranchNode, visit)
	case *parse.WithNode:
		walkBranch(&n.BranchNode, visit)
	case *parse.TemplateNode:
		walk(n.Pipe, visit)
	}
}

func walkBranch(n *parse.BranchNode, visit func([]string)) {
	walk(n.Pipe, visit)
	walk(n.List, visit)
	if n.ElseList != nil {
		walk(n.ElseList, visit)
	}
}
