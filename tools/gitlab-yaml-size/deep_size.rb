# frozen_string_literal: true

# The size GitLab gives a CI configuration when it checks `max_yaml_size_bytes`: the
# document loaded with Psych's safe loader (symbols permitted, aliases allowed, the
# `!reference` tag known), then the sum of `ObjectSpace.memsize_of` over the loaded value
# and, depth first, every element of its arrays and every key and value of its hashes.
# GitLab measures the document as loaded, before `extends`, `!reference` or `include`
# are resolved; a `!reference` is one object whose contents are not counted.
#
# Usage: ruby deep_size.rb FILE...   prints "<size> <file>" per file; exit 1 if a file
# does not load as a mapping.

require 'objspace'
require 'yaml'

# What a `!reference [job, key]` loads to: an object holding the sequence, as GitLab's
# tag class does; only the object itself is measured.
class TerraciReference
  attr_reader :data

  def init_with(coder)
    @data = coder.seq
  end
end

YAML.add_tag('!reference', TerraciReference)

def deep_size(value, depth = 0)
  raise 'deeper than GitLab allows (100 levels)' if depth > 100

  size = ObjectSpace.memsize_of(value)
  case value
  when Array
    value.each { |item| size += deep_size(item, depth + 1) }
  when Hash
    value.each { |key, item| size += deep_size(key, depth + 1) + deep_size(item, depth + 1) }
  end
  size
end

status = 0
ARGV.each do |path|
  loaded = YAML.safe_load(File.read(path),
                          permitted_classes: [Symbol, TerraciReference],
                          permitted_symbols: [],
                          aliases: true)
  unless loaded.is_a?(Hash)
    warn "#{path}: not a mapping"
    status = 1
    next
  end
  puts "#{deep_size(loaded)} #{path}"
end
exit status
