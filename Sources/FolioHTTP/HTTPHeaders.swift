/// The header fields of one response, names lowercased, in arrival order.
struct HTTPHeaders: Sendable {
    private(set) var fields: [(name: String, value: String)] = []

    mutating func append(name: String, value: String) { fields.append((name, value)) }

    /// The first value of a field (`name` lowercased).
    subscript(_ name: String) -> String? { fields.first { $0.name == name }?.value }
}
