; Canopy extraction rules for Python (tags-query capture names; see lang/extract.rs).

; ---- definitions ----------------------------------------------------------
(class_definition name: (identifier) @name) @definition.class
(function_definition name: (identifier) @name) @definition.function
; `normalize = lambda s: …` is a function named after its variable.
(assignment left: (identifier) @name right: (lambda)) @definition.function
; `type Price = float` (Python 3.12).
(type_alias_statement left: (type (identifier) @name)) @definition.type
(type_alias_statement left: (type (generic_type (identifier) @name))) @definition.type
; Module-level UPPER_CASE assignments are constants.
(module
  (expression_statement
    (assignment left: (identifier) @name)) @definition.constant
  (#match? @name "^_*[A-Z][A-Z0-9_]*$"))

; ---- calls ----------------------------------------------------------------
(call function: (identifier) @name) @reference.call
(call function: (attribute object: (_) @qualifier attribute: (identifier) @name)) @reference.call

; ---- imports --------------------------------------------------------------
(import_statement name: (dotted_name) @name) @reference.import
(import_statement name: (aliased_import name: (dotted_name) @name)) @reference.import
(import_from_statement
  module_name: (_) @qualifier
  name: (dotted_name) @name) @reference.import
(import_from_statement
  module_name: (_) @qualifier
  name: (aliased_import name: (dotted_name) @name)) @reference.import
(import_from_statement
  module_name: (_) @qualifier
  (wildcard_import) @name) @reference.import
(future_import_statement "__future__" @qualifier name: (dotted_name) @name) @reference.import
(future_import_statement
  "__future__" @qualifier
  name: (aliased_import name: (dotted_name) @name)) @reference.import

; ---- type references (annotations and base classes) -----------------------
; Scalar builtins (`int`, `str`, …) are not worth a reference, as in the
; other languages, whose grammars tell primitive types apart.
((type (identifier) @name) @reference.type
  (#not-any-of? @name "int" "float" "complex" "str" "bytes" "bool" "object"))
(type (attribute object: (_) @qualifier attribute: (identifier) @name)) @reference.type
((generic_type (identifier) @name) @reference.type
  (#not-any-of? @name "int" "float" "complex" "str" "bytes" "bool" "object"))
(class_definition
  superclasses: (argument_list (identifier) @name) @reference.type)
(class_definition
  superclasses: (argument_list
    (attribute object: (_) @qualifier attribute: (identifier) @name) @reference.type))

; Type parameters (`def first[T](items: list[T]) -> T`) are local to their definition.
(_
  type_parameters: (type_parameter (type (identifier) @local.definition))) @local.scope
