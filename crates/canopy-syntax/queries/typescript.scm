; TypeScript-only rules, appended to ecmascript.scm for .ts and .tsx files.

; ---- definitions ----------------------------------------------------------
(interface_declaration name: (type_identifier) @name) @definition.interface
(type_alias_declaration name: (type_identifier) @name) @definition.type
(enum_declaration name: (identifier) @name) @definition.enum
(abstract_class_declaration name: (type_identifier) @name) @definition.class
(internal_module name: (_) @name) @definition.module
; `declare module 'express-session' { … }` is named without quotes.
(module name: (string (string_fragment) @name)) @definition.module
(module name: [(identifier) (nested_identifier)] @name) @definition.module
(method_signature name: (_) @name) @definition.method
(abstract_method_signature name: (_) @name) @definition.method
(function_signature name: (identifier) @name) @definition.function
; A property whose type is a function (`onEvent?: (e: Event) => void`) is
; called like a method: a method of its interface or type literal.
(property_signature
  name: (property_identifier) @name
  type: (type_annotation (function_type))) @definition.method
(public_field_definition
  name: [(property_identifier) (private_property_identifier)] @name
  value: [(arrow_function) (function_expression) (generator_function)]) @definition.method
; `const` bindings directly in a namespace are constants, as at the top level.
(internal_module
  body: (statement_block
    (lexical_declaration
      kind: "const"
      (variable_declarator name: (identifier) @name value: (_) @_value) @definition.constant))
  (#not-match? @_value "^require[ \t]*\\("))
(internal_module
  body: (statement_block
    (export_statement
      (lexical_declaration
        kind: "const"
        (variable_declarator name: (identifier) @name value: (_) @_value) @definition.constant)))
  (#not-match? @_value "^require[ \t]*\\("))

; ---- calls ----------------------------------------------------------------
; tree-sitter-typescript parses `await a.get<T>(x)` as a call of `await a.get`.
(call_expression
  function: (await_expression (identifier) @name)) @reference.call
(call_expression
  function: (await_expression
    (member_expression
      object: (_) @qualifier
      property: [(property_identifier) (private_property_identifier)] @name))) @reference.call

; ---- type references ------------------------------------------------------
(nested_type_identifier module: (_) @qualifier name: (type_identifier) @name) @reference.type
(type_identifier) @name @reference.type
; `class UserService extends Repository<User>`: the superclass is a type reference.
(extends_clause value: (identifier) @name) @reference.type
(extends_clause
  value: (member_expression object: (_) @qualifier property: (property_identifier) @name)) @reference.type

; Type parameters are local to their declaration: `T` is no type reference.
(_
  type_parameters: (type_parameters
    (type_parameter name: (type_identifier) @local.definition))) @local.scope
