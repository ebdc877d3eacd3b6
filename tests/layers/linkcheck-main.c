// linkcheck-main.c: the program each rt_linkcheck_<layer> links with the whole archive of one
// layer and the layers below it (CMakeLists.txt): it links only when no object of the layer
// calls into a layer above it, so the library graph is acyclic in symbols too, not only in
// includes.
int main(void) {
    return 0;
}
