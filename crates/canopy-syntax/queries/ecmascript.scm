; Canopy extraction rules shared by JavaScript, TypeScript and TSX (node types
; common to both grammars). Each language appends its own file: javascript.scm
; or typescript.scm (and jsx.scm for .js/.jsx and .tsx). Earlier patterns win
; when two capture the same span.

; ---- definitions ----------------------------------------------------------
(function_declaration name: (identifier) @name) @definition.function
(generator_function_declaration name: (identifier) @name) @definition.function
(class_declaration name: (_) @name) @definition.class
; A method in a class; in an object literal (`{ show() {} }`) a function,
; like `{ list: function () {} }` (the extractor makes functions in classes methods).
(method_definition name: (_) @name) @definition.function

; Functions named after what they are assigned to.
(variable_declarator
  name: (identifier) @name
  value: [(arrow_function) (function_expression) (generator_function)]) @definition.function
(variable_declarator name: (identifier) @name value: (class)) @definition.class
(assignment_expression
  left: (member_expression property: (property_identifier) @name)
  right: [(arrow_function) (function_expression) (generator_function)]) @definition.function
(assignment_expression
  left: (identifier) @name
  right: [(arrow_function) (function_expression) (generator_function)]) @definition.function
(pair
  key: (property_identifier) @name
  value: [(arrow_function) (function_expression) (generator_function)]) @definition.function
; A named function expression passed as an argument: `on('exit', function onExit() {})`.
(arguments
  (function_expression name: (identifier) @name) @definition.function)

; Top-level `const` bindings that are not functions, classes or `require`s
; are constants (`let` and `var` bindings are mutable state: chunk text).
(program
  (lexical_declaration
    kind: "const"
    (variable_declarator name: (identifier) @name value: (_) @_value) @definition.constant)
  (#not-match? @_value "^require[ \t]*\\("))
(program
  (export_statement
    (lexical_declaration
      kind: "const"
      (variable_declarator name: (identifier) @name value: (_) @_value) @definition.constant))
  (#not-match? @_value "^require[ \t]*\\("))

; ---- calls ----------------------------------------------------------------
; `require('x')` is an import, not a call.
((call_expression function: (identifier) @name) @reference.call
  (#not-eq? @name "require"))
(call_expression
  function: (member_expression
    object: (_) @qualifier
    property: [(property_identifier) (private_property_identifier)] @name)) @reference.call
(new_expression constructor: (identifier) @name) @reference.call
(new_expression
  constructor: (member_expression object: (_) @qualifier property: (property_identifier) @name)) @reference.call

; ---- imports --------------------------------------------------------------
; Named after what is imported; the module specifier (without quotes) is the qualifier.
(import_statement
  (import_clause (named_imports (import_specifier name: (_) @name)))
  source: (string (string_fragment) @qualifier)) @reference.import
(import_statement
  (import_clause (identifier) @name)
  source: (string (string_fragment) @qualifier)) @reference.import
(import_statement
  (import_clause (namespace_import (identifier) @name))
  source: (string (string_fragment) @qualifier)) @reference.import
; `import './polyfills.js'` imports the module itself.
(import_statement
  "import" .
  source: (string (string_fragment) @name)) @reference.import
; Re-exports import what they export.
(export_statement
  (export_clause (export_specifier name: (_) @name))
  source: (string (string_fragment) @qualifier)) @reference.import
(export_statement
  "*" @name
  source: (string (string_fragment) @qualifier)) @reference.import
; `require('x')` and `import('x')` import the module.
(call_expression
  function: (identifier) @_require
  arguments: (arguments . (string (string_fragment) @name))
  (#eq? @_require "require")) @reference.import
(call_expression
  function: (import)
  arguments: (arguments . (string (string_fragment) @name))) @reference.import
