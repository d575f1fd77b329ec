// Fixture of the include-order check: an energy source that includes a private scene header.
#include <xpd/mesh/tet_mesh.hpp>
#include "scene/json_reader.hpp"
