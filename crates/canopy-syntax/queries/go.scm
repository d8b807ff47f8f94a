; Canopy extraction rules for Go (tags-query capture names; see lang/extract.rs).

; ---- definitions ----------------------------------------------------------
(function_declaration name: (identifier) @name) @definition.function
(method_declaration
  receiver: (parameter_list
    (parameter_declaration
      type: [
        (type_identifier) @receiver
        (pointer_type (type_identifier) @receiver)
        (generic_type type: (type_identifier) @receiver)
        (pointer_type (generic_type type: (type_identifier) @receiver))
      ]))
  name: (field_identifier) @name) @definition.method
(type_spec name: (type_identifier) @name type: (struct_type)) @definition.struct
(type_spec name: (type_identifier) @name type: (interface_type)) @definition.interface
(type_spec name: (type_identifier) @name) @definition.type
(type_alias name: (type_identifier) @name) @definition.type
(method_elem name: (field_identifier) @name) @definition.method
(const_spec name: (identifier) @name) @definition.constant

; ---- calls ----------------------------------------------------------------
(call_expression function: (identifier) @name) @reference.call
(call_expression
  function: (selector_expression operand: (_) @qualifier field: (field_identifier) @name)) @reference.call

; ---- imports --------------------------------------------------------------
(import_spec path: (_) @name) @reference.import

; ---- type references ------------------------------------------------------
(qualified_type package: (package_identifier) @qualifier name: (type_identifier) @name) @reference.type
; Predeclared types (`string`, `error`, …) are not worth a reference, as in
; the grammars that tell primitive types apart.
((type_identifier) @name @reference.type
  (#not-any-of? @name
    "any" "bool" "byte" "comparable" "complex64" "complex128" "error" "float32" "float64"
    "int" "int8" "int16" "int32" "int64" "rune" "string"
    "uint" "uint8" "uint16" "uint32" "uint64" "uintptr"))

; Type parameters are local to their declaration: `T` is no type reference.
(_
  type_parameters: (type_parameter_list
    (type_parameter_declaration name: (identifier) @local.definition))) @local.scope
; `func (l *List[T]) Push(v T)`: the receiver's type arguments name them.
(method_declaration
  receiver: (parameter_list
    (parameter_declaration
      type: [
        (generic_type type_arguments: (type_arguments (type_elem (type_identifier) @local.definition)))
        (pointer_type
          (generic_type type_arguments: (type_arguments (type_elem (type_identifier) @local.definition))))
      ]))) @local.scope
