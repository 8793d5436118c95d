package variables

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
	"time"
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
	tmpl, err := template.New("valueFrom.template").Option("missingkey=error").Funcs(noStep).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("does not parse: %w", err)
	}
	// Simple templates are written without text/template (and need no
	// bound); the parts are read before the steps go in.
	parts := simpleParts(tmpl)
	for _, tt := range tmpl.Templates() {
		instrument(tt.Tree)
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
	return &Template{tmpl: tmpl, parts: parts}, nil
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
		var err error
		if text, err = t.executeBounded(values); err != nil {
			return nil, err
		}
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

// Bounds of one template execution. CEL has a cost limit; text/template
// has none, and a template's range over the parent's data, nested, or a
// defined template calling itself twice, can run for hours or write
// gigabytes. text/template can't be interrupted from outside, so
// ParseTemplate puts a call of stepFunc at the start of every range body
// and every template body: each execution counts its steps and its time
// there and stops, with an error, past MaxTemplateSteps or
// MaxTemplateTime; its output stops at MaxTemplateOutput. The patch then
// fails, so does the sync (a SyncError), and the worker is free.
var (
	MaxTemplateOutput = 256 << 10
	MaxTemplateSteps  = 1_000_000
	MaxTemplateTime   = time.Second
)

// stepFunc is the function ParseTemplate calls at every step; the name is
// not one a template author would pick.
const stepFunc = "_composite_template_step"

// noStep is stepFunc at parse time; each execution has its own.
var noStep = template.FuncMap{stepFunc: func() (string, error) { return "", nil }}

// stepNode is the action {{_composite_template_step}}, copied into
// templates.
var stepNode = template.Must(template.New("step").Funcs(noStep).Parse("{{" + stepFunc + "}}")).Tree.Root.Nodes[0]

// instrument puts a step at the start of every template body and range
// body of tree.
func instrument(tree *parse.Tree) {
	if tree == nil || tree.Root == nil {
		return
	}
	var visit func(list *parse.ListNode)
	visit = func(list *parse.ListNode) {
		if list == nil {
			return
		}
		for _, n := range list.Nodes {
			switch n := n.(type) {
			case *parse.RangeNode:
				visit(n.List)
				visit(n.ElseList)
				if n.List != nil {
					n.List.Nodes = append([]parse.Node{stepNode.Copy()}, n.List.Nodes...)
				}
			case *parse.IfNode:
				visit(n.List)
				visit(n.ElseList)
			case *parse.WithNode:
				visit(n.List)
				visit(n.ElseList)
			case *parse.ListNode:
				visit(n)
			}
		}
	}
	visit(tree.Root)
	tree.Root.Nodes = append([]parse.Node{stepNode.Copy()}, tree.Root.Nodes...)
}

// steps is one execution's budget.
type steps struct {
	left     int
	deadline time.Time
}

func (b *steps) step() (string, error) {
	b.left--
	if b.left < 0 {
		return "", fmt.Errorf("stopped after %d steps", MaxTemplateSteps)
	}
	if b.left%1024 == 0 && time.Now().After(b.deadline) {
		return "", fmt.Errorf("stopped after running %s", MaxTemplateTime)
	}
	return "", nil
}

// executeBounded runs the template with text/template, within the bounds
// above.
func (t *Template) executeBounded(values Source) ([]byte, error) {
	run, err := t.tmpl.Clone()
	if err != nil {
		return nil, err
	}
	budget := &steps{left: MaxTemplateSteps, deadline: time.Now().Add(MaxTemplateTime)}
	run.Funcs(template.FuncMap{stepFunc: budget.step})
	out := &boundedWriter{limit: MaxTemplateOutput}
	if err := run.Execute(out, map[string]interface{}(values.All())); err != nil {
		return nil, err
	}
	return out.buf.Bytes(), nil
}

// boundedWriter keeps what a template writes, up to limit bytes.
type boundedWriter struct {
	buf   bytes.Buffer
	limit int
}

func (w *boundedWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.limit {
		return 0, fmt.Errorf("its output is longer than %d bytes", w.limit)
	}
	return w.buf.Write(p)
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
