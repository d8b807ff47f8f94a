; Canopy extraction rules shared by JavaScript, TypeScript and TSX (node types
; common to both grammars). Each language appends its own file: javascript.scm
; or typescript.scm. Earlier patterns win when two capture the same span.

; ---- definitions ----------------------------------------------------------
(function_declaration name: (identifier) @name) @definition.function
(generator_function_declaration name: (identifier) @name) @definition.function
(class_declaration name: (_) @name) @definition.class
(method_definition name: (_) @name) @definition.method

; Functions named after what they are assigned to.
(variable_declarator
  name: (identifier) @name
  value: [(arrow_function) (function_expression) (generator_function)]) @definition.function
(variable_declarator name: (identifier) @name value: (class)) @definition.class
(assignment_expression
  left: (member_expression property: (property_identifier) @name)
  right: [(arrow_function) (function_expression)]) @definition.function
(assignment_expression
  left: (identifier) @name
  right: [(arrow_function) (function_expression)]) @definition.function
(pair
  key: (property_identifier) @name
  value: [(arrow_function) (function_expression)]) @definition.function

; Top-level bindings that are not functions are constants.
(program (lexical_declaration (variable_declarator name: (identifier) @name) @definition.constant))
(program
  (export_statement
    (lexical_declaration (variable_declarator name: (identifier) @name) @definition.constant)))

; ---- calls ----------------------------------------------------------------
(call_expression function: (identifier) @name) @reference.call
(call_expression
  function: (member_expression object: (_) @qualifier property: (property_identifier) @name)) @reference.call
(new_expression constructor: (identifier) @name) @reference.call
(new_expression
  constructor: (member_expression object: (_) @qualifier property: (property_identifier) @name)) @reference.call

; ---- imports --------------------------------------------------------------
(import_statement
  (import_clause (named_imports (import_specifier name: (_) @name)))
  source: (string) @qualifier) @reference.import
(import_statement
  (import_clause (identifier) @name)
  source: (string) @qualifier) @reference.import
(import_statement
  (import_clause (namespace_import (identifier) @name))
  source: (string) @qualifier) @reference.import
(call_expression
  function: (identifier) @_require
  arguments: (arguments . (string) @name)
  (#eq? @_require "require")) @reference.import
