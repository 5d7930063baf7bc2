package openapi

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"
)

// comments are the doc comments of package api's source: of each type
// ("Sandbox"), each struct field ("Sandbox.State") and each constant
// ("CodeNoSandbox", with its value: codes maps "S01" to its comment).
type comments struct {
	docs  map[string]string
	codes map[string]string // error code → what it means
	order []string          // error codes in the order errors.go lists them
}

// readComments parses the Go files of package api in dir.
func readComments(dir string) (*comments, error) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	c := &comments{docs: map[string]string{}, codes: map[string]string{}}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range g.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					c.docs[s.Name.Name] = text(firstOf(s.Doc, g.Doc))
					if st, ok := s.Type.(*ast.StructType); ok {
						for _, fld := range st.Fields.List {
							for _, n := range fld.Names {
								c.docs[s.Name.Name+"."+n.Name] = text(firstOf(fld.Doc, fld.Comment))
							}
						}
					}
				case *ast.ValueSpec:
					if len(s.Names) != 1 || len(s.Values) != 1 || !strings.HasPrefix(s.Names[0].Name, "Code") {
						continue
					}
					lit, ok := s.Values[0].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					code := strings.Trim(lit.Value, `"`)
					c.codes[code] = text(firstOf(s.Comment, s.Doc))
					c.order = append(c.order, code)
				}
			}
		}
	}
	return c, nil
}

func firstOf(groups ...*ast.CommentGroup) *ast.CommentGroup {
	for _, g := range groups {
		if g != nil {
			return g
		}
	}
	return nil
}

// text is a comment as one paragraph of prose.
func text(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	return strings.Join(strings.Fields(g.Text()), " ")
}

var timeType = reflect.TypeFor[time.Time]()

// schemas turns api types into JSON Schemas (OpenAPI 3.1's dialect), each
// named struct a component referred to by $ref.
type schemas struct {
	docs  *comments
	named map[string]reflect.Type // component name → its Go type
}

func newSchemas(docs *comments) *schemas {
	return &schemas{docs: docs, named: map[string]reflect.Type{}}
}

// ref returns the $ref of struct type t's component, adding it (and what
// it refers to) when it is new.
func (s *schemas) ref(t reflect.Type) obj {
	if t.Kind() != reflect.Struct || t.Name() == "" {
		panic(fmt.Sprintf("openapi: %v is not a named struct", t))
	}
	if prev, ok := s.named[t.Name()]; ok && prev != t {
		panic(fmt.Sprintf("openapi: two types named %s", t.Name()))
	}
	if _, ok := s.named[t.Name()]; !ok {
		s.named[t.Name()] = t
		for i := range t.NumField() {
			s.of(t.Field(i).Type) // reach what it refers to now
		}
	}
	return obj{{"$ref", "#/components/schemas/" + t.Name()}}
}

// of is the schema of a value of type t.
func (s *schemas) of(t reflect.Type) obj {
	if t == timeType {
		return obj{{"type", "string"}, {"format", "date-time"}}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return s.of(t.Elem())
	case reflect.String:
		return obj{{"type", "string"}}
	case reflect.Bool:
		return obj{{"type", "boolean"}}
	case reflect.Int, reflect.Int64:
		return obj{{"type", "integer"}, {"format", "int64"}}
	case reflect.Int32:
		return obj{{"type", "integer"}, {"format", "int32"}}
	case reflect.Uint16:
		return obj{{"type", "integer"}, {"minimum", 0}, {"maximum", 65535}}
	case reflect.Uint32:
		return obj{{"type", "integer"}, {"format", "int64"}, {"minimum", 0}, {"maximum", uint64(1<<32 - 1)}}
	case reflect.Float64, reflect.Float32:
		return obj{{"type", "number"}}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return obj{{"type", "string"}, {"contentEncoding", "base64"}}
		}
		return obj{{"type", "array"}, {"items", s.of(t.Elem())}}
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			panic(fmt.Sprintf("openapi: map key of %v", t))
		}
		return obj{{"type", "object"}, {"additionalProperties", s.of(t.Elem())}}
	case reflect.Interface:
		return obj{} // any JSON value
	case reflect.Struct:
		return s.ref(t)
	}
	panic(fmt.Sprintf("openapi: no schema for %v", t))
}

// jsonField is how encoding/json names struct field f, whether it may be
// left out, and whether it is there at all.
func jsonField(f reflect.StructField) (name string, optional, ok bool) {
	if !f.IsExported() || f.Anonymous {
		return "", false, false
	}
	tag, has := f.Tag.Lookup("json")
	if !has {
		return f.Name, false, true
	}
	parts := strings.Split(tag, ",")
	if parts[0] == "-" && len(parts) == 1 {
		return "", false, false
	}
	name = parts[0]
	if name == "" {
		name = f.Name
	}
	for _, o := range parts[1:] {
		if o == "omitempty" || o == "omitzero" {
			optional = true
		}
	}
	return name, optional, true
}

// component is the schema of struct type t itself: its properties in the
// order of its fields, those always present required.
func (s *schemas) component(t reflect.Type) obj {
	props := obj{}
	var required []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			panic(fmt.Sprintf("openapi: %s embeds %s: not supported", t.Name(), f.Name))
		}
		name, optional, ok := jsonField(f)
		if !ok {
			continue
		}
		p := s.of(f.Type)
		if d := s.docs.docs[t.Name()+"."+f.Name]; d != "" {
			p = append(p, kv{"description", d}) // beside a $ref too, as OpenAPI 3.1 allows
		}
		props = append(props, kv{name, p})
		if !optional {
			required = append(required, name)
		}
	}
	out := obj{{"type", "object"}}
	if d := s.docs.docs[t.Name()]; d != "" {
		out = append(out, kv{"description", d})
	}
	out = append(out, kv{"properties", props})
	if len(required) > 0 {
		out = append(out, kv{"required", required})
	}
	return append(out, kv{"x-go-type", "api." + t.Name()})
}

// components is every component reached, by name.
func (s *schemas) components() obj {
	names := make([]string, 0, len(s.named))
	for n := range s.named {
		names = append(names, n)
	}
	sort.Strings(names)
	out := obj{}
	for _, n := range names {
		out = append(out, kv{n, s.component(s.named[n])})
	}
	return out
}
